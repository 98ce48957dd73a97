// A small Ô Ăn Quan client on top of the code that `buf generate` writes into src/gen/.
//
// It shows what every integrator needs:
// * calling GameService / RulesService with timeouts and the
//   `authorization: Bearer <token>` header (connect(), bearer()),
// * reading the machine-readable reason of a failed call (errorReason()),
// * following a game's event stream and resuming it after a disconnect without
//   gaps or duplicates (EventFollower),
// * playing on the clock: time controls (parseTimeControl) and the server's clocks
//   (clocksOf, remainingMs, formatClocks), each seat played through its own client
//   (SeatPlayer, playOnline),
// * finding an opponent with a seek (SeekCall, seek),
// * accounts and rated games: registering (register, Account), playing as the account with
//   its API key (ratedSeek, the key as bearer on the account's seats), and reading rating
//   changes and profiles (formatRating, formatChange, ratingChanges).

import { Code, ConnectError, createClient, type CallOptions, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";

import { randomBytes } from "node:crypto";

import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { AccountService } from "./gen/oanquan/v1/account_pb.js";
import {
  GameEvent_GameOverSchema,
  GameService,
  GameStatus,
  TimeControlSchema,
  type Clocks,
  type GameEvent,
  type GameEvent_GameOver,
  type Game,
  type GameResult,
  type MoveRecord,
  type RatingChange,
  type Seek,
  type SeekRequestSchema,
  type SeekResponse,
  type SeekResponse_Paired,
  type TimeControl,
} from "./gen/oanquan/v1/game_pb.js";
import { Player, RulesService } from "./gen/oanquan/v1/rules_pb.js";

/** Deadline of every unary call. Always set one: a call without a deadline can hang forever. */
export const CALL_TIMEOUT_MS = 10_000;

export interface OanQuan {
  games: Client<typeof GameService>;
  rules: Client<typeof RulesService>;
  accounts: Client<typeof AccountService>;
}

/**
 * Clients for the three services over one HTTP/2 connection. The server speaks gRPC
 * over cleartext HTTP/2 (h2c), so the base URL is http://host:port.
 */
export function connect(address: string): OanQuan {
  const baseUrl = address.includes("://") ? address : `http://${address}`;
  const transport = createGrpcTransport({
    baseUrl,
    defaultTimeoutMs: CALL_TIMEOUT_MS,
  });
  return {
    games: createClient(GameService, transport),
    rules: createClient(RulesService, transport),
    accounts: createClient(AccountService, transport),
  };
}

/**
 * Call options for PlayMove, Resign and AbortGame (a seat token, or the API key of the account
 * in the seat), and for calls made as an account (an API key).
 */
export function bearer(token: string, options: CallOptions = {}): CallOptions {
  return { ...options, headers: { authorization: `Bearer ${token}` } };
}

/**
 * The google.rpc.ErrorInfo reason of a failed call ("ERROR_REASON_NOT_YOUR_TURN", ...).
 * Branch on this, not on the message. Undefined when there is none (INVALID_ARGUMENT
 * carries a google.rpc.BadRequest instead).
 */
export function errorReason(error: unknown): string | undefined {
  return ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason;
}

/** The event stream skipped or repeated a sequence number (a server bug). */
export class GapError extends Error {
  override name = "GapError";
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Follows GameService.WatchGame for one game.
 *
 * - The first connection has no `afterSequence`: the server starts with a Snapshot.
 * - Every real event must have sequence = last + 1 (else GapError). Snapshot and
 *   Heartbeat carry the sequence of the last real event they reflect and are not
 *   counted; a Snapshot replaces whatever state we had.
 * - After a disconnect we reconnect with `afterSequence` = the last sequence seen, and
 *   the server sends exactly the missed events (or a fresh Snapshot if its log no longer
 *   has them).
 * - The stream ends (status OK) after GameOver.
 *
 * drop() aborts the current stream, as a network failure would, and holds off the
 * reconnection until resume(), so a test can make sure events are missed meanwhile.
 */
export class EventFollower {
  lastSequence = 0n;
  /** Real events, in order. */
  readonly events: GameEvent[] = [];
  readonly snapshots: GameEvent[] = [];
  /** `afterSequence` of each connection (0n = none). */
  readonly connections: bigint[] = [];
  /** The last sequence seen when each stream broke. */
  readonly disconnectedAt: bigint[] = [];
  /** The sequence of the first message each connection received. */
  readonly firstSequencePerConnection: bigint[] = [];
  gameOver: GameEvent_GameOver | undefined;
  done: Promise<void> = Promise.resolve();

  private abort: AbortController | undefined;
  private held = false;
  private resumeGate: { promise: Promise<void>; open: () => void } = EventFollower.gate();
  private waiters = new Set<() => void>();
  private error: unknown;

  constructor(
    private readonly api: OanQuan,
    readonly gameId: string,
    private readonly onEvent?: (event: GameEvent) => void,
  ) {}

  private static gate() {
    let open!: () => void;
    const promise = new Promise<void>((resolve) => (open = resolve));
    return { promise, open };
  }

  start(): this {
    this.done = this.run();
    // Never leave the promise unhandled; waitUntil() and done report the error.
    this.done.catch(() => {});
    return this;
  }

  /** Resolves once predicate(this) holds (checked after every message). */
  waitUntil(predicate: (f: this) => boolean, timeoutMs = CALL_TIMEOUT_MS): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.error !== undefined) {
          cleanup();
          reject(this.error);
        } else if (predicate(this)) {
          cleanup();
          resolve();
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`watcher of ${this.gameId}: condition not met within ${timeoutMs}ms`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  /** Aborts the current stream and does not reconnect until resume(). */
  drop(): void {
    if (!this.held) {
      this.held = true;
      this.resumeGate = EventFollower.gate();
    }
    this.abort?.abort();
  }

  resume(): void {
    this.resumeGate.open();
  }

  private notify(): void {
    for (const check of [...this.waiters]) check();
  }

  private async run(): Promise<void> {
    try {
      while (this.gameOver === undefined) {
        if (this.held) {
          await this.resumeGate.promise;
          this.held = false;
        }
        await this.streamOnce();
      }
    } catch (error) {
      this.error = error;
      this.notify();
      throw error;
    }
  }

  private async streamOnce(): Promise<void> {
    const abort = new AbortController();
    this.abort = abort;
    const afterSequence = this.lastSequence;
    this.connections.push(afterSequence);
    let first = true;
    try {
      // No deadline (timeoutMs: 0 overrides the transport default): a watch lasts as long
      // as the game. Heartbeats (about every 15 s) keep an idle stream alive.
      const stream = this.api.games.watchGame(
        { gameId: this.gameId, afterSequence: afterSequence > 0n ? afterSequence : undefined },
        { signal: abort.signal, timeoutMs: 0 },
      );
      for await (const response of stream) {
        const event = response.event;
        if (!event) continue;
        if (first) {
          this.firstSequencePerConnection.push(event.sequence);
          first = false;
        }
        this.accept(event);
      }
    } catch (error) {
      const code = ConnectError.from(error).code;
      if (code === Code.Canceled && this.held) {
        this.disconnectedAt.push(this.lastSequence);
        return; // our own drop(): reconnect after resume()
      }
      if (code === Code.Unavailable) {
        this.disconnectedAt.push(this.lastSequence);
        await sleep(500); // a real disconnect: resume from lastSequence shortly
        return;
      }
      abort.abort(); // e.g. GapError: stop the stream before reporting
      throw error;
    } finally {
      this.abort = undefined;
    }
    if (this.gameOver === undefined) {
      throw new GapError(`stream ended (OK) at sequence ${this.lastSequence} without GameOver`);
    }
  }

  private accept(event: GameEvent): void {
    const kind = event.kind;
    switch (kind.case) {
      case "heartbeat":
        break;
      case "snapshot": {
        // Full state; the next real event is sequence + 1.
        this.snapshots.push(event);
        this.lastSequence = event.sequence;
        const game = kind.value.game;
        if (game && (game.status === GameStatus.FINISHED || game.status === GameStatus.ABORTED)) {
          this.gameOver = create(GameEvent_GameOverSchema, { result: game.result });
        }
        break;
      }
      default: {
        if (event.sequence !== this.lastSequence + 1n) {
          throw new GapError(`expected sequence ${this.lastSequence + 1n}, got ${event.sequence} (${kind.case})`);
        }
        this.events.push(event);
        this.lastSequence = event.sequence;
        if (kind.case === "gameOver") this.gameOver = kind.value;
      }
    }
    this.onEvent?.(event);
    this.notify();
  }
}

/** A game this client plays both seats of. */
export interface PlayedGame {
  game: Game;
  tokens: Map<Player, string>;
  moves: MoveRecord[];
}

/**
 * Creates a game with the standard preset, seated as FIRST (who moves first).
 * `timeControl` unset = untimed (see parseTimeControl).
 */
export async function createGame(api: OanQuan, name = "alice", timeControl?: TimeControl): Promise<PlayedGame> {
  const created = await api.games.createGame({
    rules: { kind: { case: "preset", value: "standard" } },
    seat: Player.FIRST,
    displayName: name,
    timeControl,
  });
  return { game: created.game!, tokens: new Map([[created.seat, created.playerToken]]), moves: [] };
}

/** Takes the free seat (SECOND); the game becomes ACTIVE. */
export async function joinGame(api: OanQuan, played: PlayedGame, name = "bob"): Promise<void> {
  const joined = await api.games.joinGame({ gameId: played.game.id, displayName: name });
  played.tokens.set(joined.seat, joined.playerToken);
  played.game = joined.game!;
}

/** A small seeded PRNG (mulberry32) so that games are reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Asks RulesService for the legal moves of the game's position and plays one at random. */
export async function playMove(api: OanQuan, played: PlayedGame, random: () => number): Promise<MoveRecord> {
  const { game } = played;
  const position = game.position!;
  const { moves } = await api.rules.legalMoves({
    rules: { kind: { case: "ruleSet", value: game.ruleSet! } },
    position,
  });
  if (moves.length === 0) throw new Error(`no legal move in an active game: ${position.notation}`);
  const move = moves[Math.floor(random() * moves.length)];
  const response = await api.games.playMove(
    // expectedPly guards against playing on a position that changed meanwhile.
    { gameId: game.id, move, expectedPly: position.ply },
    bearer(played.tokens.get(position.toMove)!),
  );
  played.game = response.game!;
  played.moves.push(response.record!);
  return response.record!;
}

/** Plays both seats until the game is over; returns the final game. */
export async function playSelfGame(
  api: OanQuan,
  played: PlayedGame,
  seed = 7,
  onMove?: (record: MoveRecord) => Promise<void> | void,
): Promise<Game> {
  const random = seededRandom(seed);
  while (played.game.status === GameStatus.ACTIVE) {
    const record = await playMove(api, played, random);
    await onMove?.(record);
  }
  return played.game;
}

// -- playing on the clock ---------------------------------------------------------------------

/**
 * A time control as players write it:
 * - "3+2": 3 minutes each, 2 seconds added after each move (Fischer, real time);
 * - "30s+0": 30 seconds each (seconds instead of minutes: an "s" after the first number);
 * - "2d", "12h", "30m": correspondence, a fixed time for every move;
 * - "" or "untimed": no clock (an empty TimeControl, which the server reads as unset).
 *
 * The server checks the ranges (1 s to 3 h initial, 0 to 180 s increment, 1 minute to
 * 30 days per move) and answers INVALID_ARGUMENT naming the field.
 */
export function parseTimeControl(text: string): TimeControl {
  const t = text.trim().toLowerCase();
  if (t === "" || t === "untimed") return create(TimeControlSchema);
  const realTime = /^(\d+(?:\.\d+)?)(s?)\+(\d+(?:\.\d+)?)$/.exec(t);
  if (realTime) {
    const [, initial, seconds, increment] = realTime;
    const initialMs = Number(initial) * (seconds ? 1000 : 60_000);
    const value = {
      initial: durationFromMs(Math.round(initialMs)),
      increment: durationFromMs(Math.round(Number(increment) * 1000)),
    };
    return create(TimeControlSchema, { kind: { case: "realTime", value } });
  }
  const perMove = /^(\d+(?:\.\d+)?)([dhm])$/.exec(t);
  if (perMove) {
    const unitMs = { d: 86_400_000, h: 3_600_000, m: 60_000 }[perMove[2] as "d" | "h" | "m"];
    return create(TimeControlSchema, {
      kind: { case: "correspondence", value: { perMove: durationFromMs(Math.round(Number(perMove[1]) * unitMs)) } },
    });
  }
  throw new Error(`time control ${JSON.stringify(text)}: expected e.g. 3+2, 30s+0, 2d or untimed`);
}

/** The inverse of parseTimeControl, for display. */
export function formatTimeControl(control: TimeControl | undefined): string {
  const kind = control?.kind;
  if (kind?.case === "realTime") {
    const initial = durationMs(kind.value.initial ?? durationFromMs(0)) / 1000;
    const increment = durationMs(kind.value.increment ?? durationFromMs(0)) / 1000;
    return `${initial % 60 === 0 ? initial / 60 : `${initial}s`}+${increment}`;
  }
  if (kind?.case === "correspondence") {
    const seconds = durationMs(kind.value.perMove ?? durationFromMs(0)) / 1000;
    if (seconds % 86_400 === 0) return `${seconds / 86_400}d per move`;
    if (seconds % 3_600 === 0) return `${seconds / 3_600}h per move`;
    return `${seconds / 60}m per move`;
  }
  return "untimed";
}

/**
 * The clocks an event carries (TurnStarted, MovePlayed, GameOver, a Snapshot's game), or
 * undefined for events without clocks and for untimed games.
 */
export function clocksOf(event: GameEvent): Clocks | undefined {
  const kind = event.kind;
  switch (kind.case) {
    case "turnStarted":
    case "movePlayed":
    case "gameOver":
      return kind.value.clocks;
    case "snapshot":
      return kind.value.game?.clocks;
    default:
      return undefined;
  }
}

/**
 * `player`'s time left in milliseconds.
 *
 * With `receivedAt` (your own performance.now() when the message arrived) this is the time
 * left now, for a ticking display: the running player's clock goes down by the time elapsed
 * on *your* clock since then. Never compare `measuredAt` with your own wall clock: the two
 * machines' clocks may differ.
 */
export function remainingMs(clocks: Clocks, player: Player, receivedAt?: number): number {
  const field = player === Player.FIRST ? clocks.firstRemaining : clocks.secondRemaining;
  let left = field ? durationMs(field) : 0;
  if (receivedAt !== undefined && clocks.running === player) left -= performance.now() - receivedAt;
  return Math.max(left, 0);
}

/** "FIRST 2:58.412 | SECOND 3:00.000, SECOND's clock running". */
export function formatClocks(clocks: Clocks): string {
  const mmss = (ms: number) => {
    const seconds = ms / 1000;
    return `${Math.floor(seconds / 60)}:${(seconds % 60).toFixed(3).padStart(6, "0")}`;
  };
  const text = `FIRST ${mmss(remainingMs(clocks, Player.FIRST))} | SECOND ${mmss(remainingMs(clocks, Player.SECOND))}`;
  return clocks.running === Player.UNSPECIFIED
    ? `${text}, no clock running`
    : `${text}, ${Player[clocks.running]}'s clock running`;
}

/** One person at the board: their own client (connection), their seat and its token. */
export interface SeatPlayer {
  api: OanQuan;
  seat: Player;
  token: string;
  name: string;
}

/**
 * Plays the game between two SeatPlayers, each move through the mover's own client and
 * token, until it is over or `maxMoves` were played here; returns the game as it is then.
 *
 * A real client would wait for TurnStarted on its event stream before moving; here both
 * players live in one process, so the previous move's response says whose turn it is.
 */
export async function playOnline(
  players: SeatPlayer[],
  game: Game,
  random: () => number,
  maxMoves = Infinity,
  onMove?: (record: MoveRecord, game: Game) => void,
): Promise<Game> {
  const bySeat = new Map(players.map((p) => [p.seat, p]));
  if (bySeat.size !== 2 || !bySeat.has(Player.FIRST) || !bySeat.has(Player.SECOND)) {
    throw new Error(`need one player per seat, got seats ${players.map((p) => Player[p.seat]).join(", ")}`);
  }
  let played = 0;
  while (game.status === GameStatus.ACTIVE && played < maxMoves) {
    const position = game.position!;
    const mover = bySeat.get(position.toMove)!;
    const { moves } = await mover.api.rules.legalMoves({
      rules: { kind: { case: "ruleSet", value: game.ruleSet! } },
      position,
    });
    if (moves.length === 0) throw new Error(`no legal move in an active game: ${position.notation}`);
    const response = await mover.api.games.playMove(
      { gameId: game.id, move: moves[Math.floor(random() * moves.length)], expectedPly: position.ply },
      bearer(mover.token),
    );
    game = response.game!;
    played += 1;
    onMove?.(response.record!, game);
  }
  return game;
}

// -- seeks ------------------------------------------------------------------------------------

/**
 * One GameService.Seek stream, read in the background.
 *
 * The stream sends `waiting` (the open seek, as ListSeeks shows it) unless a compatible seek
 * was already waiting, heartbeats while it waits, then `paired` (the game and the caller's
 * seat and token), and ends with OK. cancel() withdraws the seek.
 */
export class SeekCall {
  readonly messages: SeekResponse[] = [];
  waiting: Seek | undefined;
  paired: SeekResponse_Paired | undefined;
  /** Resolves when the stream ended with OK; rejects with its error otherwise. */
  readonly ended: Promise<void>;
  private finished = false;
  private error: unknown;
  private readonly abort = new AbortController();
  private readonly waiters = new Set<() => void>();

  /**
   * `timeoutMs` bounds the wait for an opponent: when it passes the call ends, which withdraws
   * the seek. `options`: bearer(apiKey) to seek as an account.
   */
  constructor(
    api: OanQuan,
    request: MessageInitShape<typeof SeekRequestSchema>,
    timeoutMs = 60_000,
    options: CallOptions = {},
  ) {
    this.ended = this.run(api, request, { ...options, signal: this.abort.signal, timeoutMs });
    this.ended.catch(() => {}); // reported by the wait*() methods and `ended`
  }

  private async run(
    api: OanQuan,
    request: MessageInitShape<typeof SeekRequestSchema>,
    options: CallOptions,
  ): Promise<void> {
    try {
      for await (const response of api.games.seek(request, options)) {
        this.messages.push(response);
        if (response.kind.case === "waiting") this.waiting = response.kind.value;
        if (response.kind.case === "paired") this.paired = response.kind.value;
        this.notify();
      }
    } catch (error) {
      this.error = error;
      throw error;
    } finally {
      this.finished = true;
      this.notify();
    }
  }

  private notify(): void {
    for (const check of [...this.waiters]) check();
  }

  private waitFor<T>(get: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const value = get();
        if (value !== undefined) {
          cleanup();
          resolve(value);
        } else if (this.finished) {
          cleanup();
          reject(this.error ?? new Error(`seek stream ended without ${what}`));
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`seek: no ${what} within ${timeoutMs}ms`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  /** The open seek (only when no compatible seek was waiting before this one). */
  async waitWaiting(timeoutMs = CALL_TIMEOUT_MS): Promise<Seek> {
    await this.waitFor(() => this.waiting ?? this.paired, "waiting", timeoutMs);
    if (this.waiting === undefined) throw new Error("paired at once: this seek never waited");
    return this.waiting;
  }

  waitPaired(timeoutMs = CALL_TIMEOUT_MS): Promise<SeekResponse_Paired> {
    return this.waitFor(() => this.paired, "paired", timeoutMs);
  }

  /** Withdraws the seek (if still waiting) by cancelling the stream. */
  async cancel(): Promise<void> {
    this.abort.abort();
    await this.ended.catch(() => {});
  }
}

/** Starts seeking an opponent for `preset` rules and `timeControl` (unset = untimed). */
export function seek(api: OanQuan, name: string, timeControl?: TimeControl, preset = "standard"): SeekCall {
  return new SeekCall(api, { rules: { kind: { case: "preset", value: preset } }, timeControl, displayName: name });
}

// -- accounts and rated games -----------------------------------------------------------------

/** A registered account and its API key (shown once by Register: keep it). */
export interface Account {
  username: string;
  apiKey: string;
  keyId: string;
}

/**
 * A fresh username for a run: names are unique for good (ignoring case and look-alike
 * letters), so a fixed one would be taken from the second run on. 3–20 letters, digits, `_`
 * and `-`; here `prefix` + 8 hex digits.
 */
export function randomUsername(prefix = "ex_"): string {
  return prefix + randomBytes(4).toString("hex");
}

/** AccountService.Register: the new account and its first API key (`oqk_…`). */
export async function register(api: OanQuan, username: string): Promise<Account> {
  const response = await api.accounts.register({ username });
  return { username: response.player!.username, apiKey: response.apiKey, keyId: response.key!.id };
}

/**
 * Seeks a rated game as `account` (its API key as bearer). Rated seeks need a time control and
 * pair only with rated seeks of other accounts; `ratingRange` limits the opponent's rating at
 * the game's speed.
 */
export function ratedSeek(
  api: OanQuan,
  account: Account,
  timeControl: TimeControl,
  ratingRange?: { min: number; max: number },
  preset = "standard",
): SeekCall {
  return new SeekCall(
    api,
    { rules: { kind: { case: "preset", value: preset } }, timeControl, rated: true, ratingRange },
    undefined,
    bearer(account.apiKey),
  );
}

/** "1500?": a provisional rating is shown with a question mark. */
export function formatRating(rating: number, provisional: boolean): string {
  return `${rating}${provisional ? "?" : ""}`;
}

/** "1500 -> 1662? (+162)". Only the rating after the game says whether it is provisional. */
export function formatChange(change: RatingChange): string {
  const delta = change.after - change.before;
  return `${change.before} -> ${formatRating(change.after, change.provisional)} (${delta >= 0 ? "+" : ""}${delta})`;
}

/**
 * Player -> rating before and after, from a rated game's result (GameOver, GetGame); empty for
 * an unrated or aborted game.
 */
export function ratingChanges(result: GameResult | undefined): Map<Player, RatingChange> {
  const changes = new Map<Player, RatingChange>();
  if (result?.firstRating) changes.set(Player.FIRST, result.firstRating);
  if (result?.secondRating) changes.set(Player.SECOND, result.secondRating);
  return changes;
}
