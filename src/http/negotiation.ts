/**
 * Content negotiation by the Accept header alone (SEED.md §1 rule 4; API.md §1). A `format`
 * query parameter is deliberately not consulted.
 */

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
  /** Position in the header: among equal q and specificity, the client's order wins. */
  index: number;
}

function parseAccept(header: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  header.split(',').forEach((part, index) => {
    const [range, ...params] = part.trim().split(';');
    const [type, subtype] = (range ?? '').trim().toLowerCase().split('/');
    if (!type || !subtype) return;
    let q = 1;
    for (const param of params) {
      const [key, value] = param.split('=').map((s) => s.trim());
      if (key?.toLowerCase() === 'q') {
        const parsed = Number(value);
        q = Number.isFinite(parsed) ? Math.min(Math.max(parsed, 0), 1) : 0;
      }
    }
    ranges.push({ type, subtype, q, index });
  });
  return ranges;
}

function specificity(range: MediaRange): number {
  return (range.type === '*' ? 0 : 1) + (range.subtype === '*' ? 0 : 1);
}

function matches(range: MediaRange, offer: string): boolean {
  const [type, subtype] = offer.split('/');
  return (range.type === '*' || range.type === type) && (range.subtype === '*' || range.subtype === subtype);
}

/**
 * Picks the offer the client prefers, or null when none is acceptable. The first offer is the
 * default for a missing or empty header. Each offer's quality is that of the most specific
 * range matching it (RFC 9110 §12.5.1); ties go to the client's order, then to our order.
 */
export function negotiate(acceptHeader: string | undefined, offers: readonly string[]): string | null {
  if (offers.length === 0) return null;
  if (acceptHeader === undefined || acceptHeader.trim() === '') return offers[0]!;
  const ranges = parseAccept(acceptHeader);
  if (ranges.length === 0) return offers[0]!;

  let best: { offer: string; q: number; index: number; order: number } | null = null;
  offers.forEach((offer, order) => {
    let match: MediaRange | null = null;
    for (const range of ranges) {
      if (!matches(range, offer)) continue;
      if (match === null || specificity(range) > specificity(match)) match = range;
    }
    if (match === null || match.q === 0) return;
    // A wildcard match ranks after an explicit mention of the same quality, so "*/*" picks JSON.
    const index = specificity(match) === 2 ? match.index : ranges.length + order;
    if (best === null || match.q > best.q || (match.q === best.q && index < best.index)) {
      best = { offer, q: match.q, index, order };
    }
  });
  return (best as { offer: string } | null)?.offer ?? null;
}
