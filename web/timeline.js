// The session timeline (the protocol's Time section): 90 kHz pts on one constant-frame-rate
// clock. The one place the browser client computes a pts; it mirrors protocols/timeline.py and
// is checked in Chromium against the same golden table (tests/protocols/pts_golden.json).

export const PTS_HZ = 90000;

// pts of the n-th frame ever sent (n from 0) at `fps`: n * 90000 / fps rounded half up, in
// integer arithmetic (floor((2 * n * 90000 + fps) / (2 * fps))). Every step is exact while
// 2 * n * 90000 + fps stays a safe integer, i.e. for n up to about 5 * 10^10 frames (over
// 49 years at 32 fps); beyond that it throws rather than drift.
export function ptsFor(n, fps) {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`frame number must be an integer >= 0, got ${n}`);
  if (!Number.isSafeInteger(fps) || fps <= 0) throw new RangeError(`fps must be an integer > 0, got ${fps}`);
  const num = 2 * n * PTS_HZ + fps;
  if (!Number.isSafeInteger(num)) throw new RangeError(`frame number ${n} is too large for exact pts at ${fps} fps`);
  const den = 2 * fps;
  return (num - (num % den)) / den;
}
