// What every page shares: the status line (a live region), timers that
// stop when the page goes, and a confirmation-free action button that
// reports its outcome.
import { ApiError } from './api';
import { h } from './dom';

let statusEl: HTMLElement | null = null;
let alertEl: HTMLElement | null = null;

export function statusRegions(): HTMLElement[] {
  statusEl = h('p', { id: 'status', role: 'status', 'aria-live': 'polite' });
  alertEl = h('p', { id: 'alert', role: 'alert' });
  return [statusEl, alertEl];
}

export function say(msg: string): void {
  if (statusEl) statusEl.textContent = msg;
  if (alertEl) alertEl.textContent = '';
}

export function sayError(e: unknown): void {
  // A key the server refuses now (revoked, or the server restarted with
  // other keys): main.ts sends the tab back to sign in.
  if (e instanceof ApiError && e.status === 401) {
    window.dispatchEvent(new CustomEvent('hutch:unauthorized'));
    return;
  }
  const msg =
    e instanceof ApiError ? `${e.code}: ${e.message}${e.requestId ? ` (request ${e.requestId})` : ''}` : String(e);
  if (alertEl) alertEl.textContent = msg;
}

// A page's life: timers and cleanups that end when the route changes.
export class Scope {
  private cleanups: (() => void)[] = [];
  alive = true;

  every(ms: number, fn: () => Promise<void> | void): void {
    let timer = 0;
    let running = false;
    const tick = async () => {
      if (!this.alive || running) return;
      running = true;
      try {
        await fn();
      } catch (e) {
        if (this.alive) sayError(e);
      } finally {
        running = false;
      }
    };
    void tick();
    timer = window.setInterval(tick, ms);
    this.onEnd(() => window.clearInterval(timer));
  }

  onEnd(fn: () => void): void {
    this.cleanups.push(fn);
  }

  end(): void {
    this.alive = false;
    for (const fn of this.cleanups.splice(0)) {
      try {
        fn();
      } catch {
        // a cleanup that fails must not stop the others
      }
    }
  }
}

// A button that runs `fn`, disabled while it runs, reporting success or the error.
export function action(label: string, fn: () => Promise<unknown>, attrs: Record<string, unknown> = {}, done?: string) {
  const b: HTMLButtonElement = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await fn();
      if (done) say(done);
    } catch (e) {
      sayError(e);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}
