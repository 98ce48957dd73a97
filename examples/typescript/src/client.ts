// A small Ô Ăn Quan client on top of the code that `buf generate` writes into src/gen/.
//
// It shows what every integrator needs:
// * calling GameService / RulesService with timeouts and the
//   `authorization: Bearer <token>` header (connect(), bearer()),
// * reading the machine-readable reason of a failed call (errorReason()),
// * following a game's event stream and resuming it after a disconnect without
//   gaps or duplicates (EventFollower).

import { Code, ConnectError, createClient, type CallOptions, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { create } from "@bufbuild/protobuf";

import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import {
  GameEvent_GameOverSchema,
  GameService,
  GameStatus,
  type GameEvent,
  type GameEvent_GameOver,
  type Game,
  type MoveRecord,
} from "./gen/oanquan/v1/game_pb.js";
import { Player, RulesService } from "./gen/oanquan/v1/rules_pb.js";

/** Deadline of every unary call. Always set one: a call without a deadline can hang forever. */
export const CALL_TIMEOUT_MS = 10_000;

export interface OanQuan {
  games: Client<typeof GameService>;
  rules: Client<typeof RulesService>;
}

/**
 * Clients for both services over one HTTP/2 connection. The server speaks gRPC
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
  };
}

/** Call options for PlayMove, Resign and AbortGame. */
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

/** Creates a game with the standard preset, seated as FIRST (who moves first). */
export async function createGame(api: OanQuan, name = "alice"): Promise<PlayedGame> {
  const created = await api.games.createGame({
    rules: { kind: { case: "preset", value: "standard" } },
    seat: Player.FIRST,
    displayName: name,
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
