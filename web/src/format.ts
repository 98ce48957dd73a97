// Labels for time controls: apart from main.ts (which needs a page) so that a plain test can
// check them. Games and seeks made through the API carry any time the server accepts, not
// only the page's own choices, and everybody sees their labels: each must be exact.

import type { Duration } from "@bufbuild/protobuf/wkt";

import type { TimeControl } from "./gen/oanquan/v1/game_pb.js";

/** Whole milliseconds, cut: `durationMs` rounds, and 59.9996 s must not read as a minute. */
const msOf = (d: Duration | undefined) => (d ? Number(d.seconds) * 1000 + Math.floor(d.nanos / 1_000_000) : 0);

/** Seconds as short as exact: 7 → "7", 1.5 → "1.5" (whole milliseconds, cut, never rounded up). */
const seconds = (ms: number) => String(Math.floor(ms) / 1000);

/** A real-time clock's initial time as the usual "5+3" has it: whole minutes as "5", less
 * than a minute as "15s", anything else minutes and seconds, "1m7s". */
function initialText(ms: number): string {
  const minutes = Math.floor(ms / 60_000);
  const rest = ms - minutes * 60_000;
  if (rest === 0) return String(minutes);
  if (minutes === 0) return `${seconds(rest)}s`;
  return `${minutes}m${seconds(rest)}s`;
}

/** A correspondence clock's time per move in its largest units, none rounded and none zero:
 * "1 min", "1 h 30 min", "2 d". */
function perMoveText(ms: number): string {
  const parts: string[] = [];
  let rest = Math.floor(ms);
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["min", 60_000],
  ] as const) {
    if (rest >= size) parts.push(`${Math.floor(rest / size)} ${unit}`);
    rest %= size;
  }
  // The server's minimum is a minute, but a label must not lie about what it gets.
  if (rest > 0 || parts.length === 0) parts.push(`${seconds(rest)} s`);
  return parts.join(" ");
}

/** The label of a game's or seek's clock: "untimed", "15s+0", "5+3", "1m7s+0", "1 d/move". */
export function timeControlText(game: { timeControl?: TimeControl }): string {
  const kind = game.timeControl?.kind;
  if (kind?.case === "realTime") {
    return `${initialText(msOf(kind.value.initial))}+${seconds(msOf(kind.value.increment))}`;
  }
  if (kind?.case === "correspondence") {
    return `${perMoveText(msOf(kind.value.perMove))}/move`;
  }
  return "untimed";
}
