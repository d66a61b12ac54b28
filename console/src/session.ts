// The API key of this tab. It lives in memory and in sessionStorage (so a
// reload of the tab keeps it, and closing the tab forgets it) — never in
// localStorage, a cookie or a URL. Every request sends it as
// `Authorization: Bearer`; the terminal's WebSocket uses a single-use
// ticket instead (api.ts).

const STORAGE_KEY = 'hutch.console.key';
let key: string | null = null;

export function currentKey(): string | null {
  if (key === null) {
    try {
      key = sessionStorage.getItem(STORAGE_KEY);
    } catch {
      key = null;
    }
  }
  return key;
}

export function signIn(k: string): void {
  key = k;
  try {
    sessionStorage.setItem(STORAGE_KEY, k);
  } catch {
    // Storage refused (private mode): the key stays in memory only.
  }
}

export function signOut(): void {
  key = null;
  try {
    sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // nothing stored
  }
}
