// The messages a client sees that more than one file says, written once, as DRF's
// `default_error_messages` (STYLE.md "Django": messages in one table, raised by key). Their text is
// DRF's and Django's, byte for byte: clients and tests match on it. It lives in http/ so that
// every layer above (auth, resources, webhooks) can use it. A message only one field type says
// stays in that type's own `messages` table (resources/fields/*.ts).

/** Messages shared across files, by key; a function for each one that names a value. */
export const MESSAGES = {
  // Any field (DRF's Field).
  required: 'This field is required.',
  null: 'This field may not be null.',
  // Types (DRF's CharField, URLField, BooleanField, JSONField, DateTimeField).
  notAString: 'Not a valid string.',
  invalidUrl: 'Enter a valid URL.',
  invalidBoolean: 'Must be a valid boolean.',
  invalidJson: 'Value must be valid JSON.',
  invalidDatetime: 'Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].',
  // Bounds.
  maxLength: (limit: number) => `Ensure this field has no more than ${limit} characters.`,
  maxValue: (limit: number | string) => `Ensure this value is less than or equal to ${limit}.`,
  minValue: (limit: number | string) => `Ensure this value is greater than or equal to ${limit}.`,
  /** A value outside a fixed list, naming the list (restwire's own choice fields and bodies). */
  notAChoiceOf: (value: unknown, choices: readonly string[]) => `"${String(value)}" is not a valid choice; choose from: ${choices.join(', ')}.`,
  // A list's query parameters (the `detail` beside the per-parameter `errors`).
  invalidQuery: 'One or more query parameters are invalid.',
  // Authentication failures: an unknown user and a wrong password answer alike (API.md §6).
  invalidCredentials: 'Invalid username or password.',
  invalidRefreshToken: 'Invalid refresh token.',
} as const;
