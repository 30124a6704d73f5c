/**
 * The package's public surface for receivers: verify a restwire delivery in your own server.
 *
 * @example
 * import { verifyDelivery } from 'restwire';
 * if (!verifyDelivery(process.env.WEBHOOK_SECRET!, request.headers, rawBody)) return reply.code(401).send();
 */
export { verifyDelivery, type IncomingHeaders, type VerifyOptions } from './webhooks/verify.js';
