// The API over gRPC-Web, from the server that served this page (or VITE_API for `npm run dev`).

import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient, type CallOptions, type Client } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";

import { AccountService } from "./gen/oanquan/v1/account_pb.js";
import { GameService } from "./gen/oanquan/v1/game_pb.js";
import { RulesService } from "./gen/oanquan/v1/rules_pb.js";

const baseUrl: string = import.meta.env.VITE_API ?? location.origin;
// Streams are not cut by this: it is the deadline of unary calls only.
const transport = createGrpcWebTransport({ baseUrl, useBinaryFormat: true });

export const games: Client<typeof GameService> = createClient(GameService, transport);
export const rules: Client<typeof RulesService> = createClient(RulesService, transport);
export const accounts: Client<typeof AccountService> = createClient(AccountService, transport);

/** Deadline of every unary call. */
export const CALL_TIMEOUT_MS = 10_000;

/** Whether `key` could be an API key: printable ASCII, as every key the server makes is. A
 * browser cannot even send another in a header (the call fails as if the server were gone). */
export const plausibleKey = (key: string): boolean => /^[\x21-\x7e]+$/.test(key);

export function bearer(token: string | undefined, options: CallOptions = {}): CallOptions {
  const withTimeout = { timeoutMs: CALL_TIMEOUT_MS, ...options };
  return token ? { ...withTimeout, headers: { authorization: `Bearer ${token}` } } : withTimeout;
}

// ---------------------------------------------------------------- errors, for players
//
// The server's messages are written for programmers ("send metadata `authorization: Bearer
// <api key>`"): the page says what a player can do instead, from the machine-readable parts
// (errors.proto). The server's own text shows only for a code this table does not know.

/** By `ErrorInfo.reason` (FAILED_PRECONDITION, NOT_FOUND, UNAUTHENTICATED, ...). */
const BY_REASON: Record<string, string> = {
  ERROR_REASON_GAME_NOT_FOUND: "there is no such game",
  ERROR_REASON_NOT_YOUR_TURN: "it is not your turn",
  ERROR_REASON_ILLEGAL_MOVE: "that move is not allowed; pick one of your squares that has stones",
  ERROR_REASON_GAME_OVER: "the game is already over",
  ERROR_REASON_GAME_NOT_STARTED: "the game has not started yet; wait for an opponent",
  ERROR_REASON_SEAT_TAKEN: "someone else took that seat; the game is full",
  ERROR_REASON_STALE_PLY: "the board changed before your move arrived; look again and play",
  ERROR_REASON_GAME_ALREADY_STARTED: "a move has been played, so the game cannot be aborted (you can resign)",
  ERROR_REASON_MISSING_TOKEN: "sign in with your API key first",
  ERROR_REASON_WRONG_TOKEN: "this browser has no seat in this game",
  ERROR_REASON_TIME_UP: "too late, the time for this move ran out",
  ERROR_REASON_CANNOT_CLAIM: "you cannot claim the win now",
  ERROR_REASON_CANNOT_OFFER: "you cannot offer another draw on this move",
  ERROR_REASON_NO_OFFER: "there is no draw offer to decline",
  ERROR_REASON_REMATCH_UNAVAILABLE: "a rematch is no longer possible for this game",
  ERROR_REASON_SEEK_NOT_FOUND: "that seek is gone; someone took it or it was withdrawn",
  ERROR_REASON_RATED_NEEDS_ACCOUNT: "rated games need an account; sign in with your API key, or play unrated",
  ERROR_REASON_BAD_API_KEY: "that API key is not valid (mistyped or revoked)",
  ERROR_REASON_USERNAME_TAKEN: "that username is taken",
  ERROR_REASON_PLAYER_NOT_FOUND: "there is no player with that name",
  ERROR_REASON_API_KEY_NOT_FOUND: "there is no such API key",
  ERROR_REASON_SEEK_REFUSED: "you cannot take that seek (it is yours, or your rating is outside its range)",
};

/** Fields whose refusals the server words for the person who typed the value ("… reads as
 * "admin", a name of the service and its staff; choose another"): its message says why, which
 * no general sentence here could. */
const IN_THE_SERVERS_WORDS = new Set(["display_name", "username"]);

/** By the field a `BadRequest` names (INVALID_ARGUMENT): the ones this page sends. */
const BY_FIELD: Record<string, string> = {
  rated: "only games between two people on a clock can be rated",
  rules: "those rules are not allowed",
  game_id: "there is no such game",
  seek_id: "that seek is gone",
  time_control: "that clock is not allowed",
};

// ERROR_REASON_LIMIT_EXCEEDED and RESOURCE_EXHAUSTED keep the server's text: it names the limit
// met and what frees it ("your address already has 20 open games ...; finish, resign or abort
// one first"), which no general sentence could.

/** By code, when no detail says more. */
const BY_CODE: Partial<Record<Code, string>> = {
  [Code.InvalidArgument]: "the server refused the request as invalid",
  [Code.FailedPrecondition]: "that is not possible now",
  [Code.NotFound]: "that could not be found",
  [Code.Unauthenticated]: "sign in with your API key first",
  // Without a reason, only a server that takes no spectators says this.
  [Code.PermissionDenied]: "only the players may watch this game",
  [Code.Unavailable]: "the server cannot be reached; check your connection",
  [Code.DeadlineExceeded]: "the server did not answer in time; try again",
  // What a browser reports when the request never got an answer ("Failed to fetch").
  [Code.Unknown]: "no answer from the server; check your connection",
  [Code.Internal]: "something went wrong on the server; try again later",
  [Code.DataLoss]: "the server's record of this is damaged",
};

/** The length-delimited values of field `number` in a protobuf message. */
function fieldsOf(bytes: Uint8Array, number: number): Uint8Array[] {
  const reader = new BinaryReader(bytes);
  const found: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const [no, type] = reader.tag();
    if (no === number && type === WireType.LengthDelimited) found.push(reader.bytes());
    else reader.skip(type, no);
  }
  return found;
}

/** The `ErrorInfo.reason` and the `BadRequest` fields of an error's details. */
function detailsOf(error: ConnectError): { reason?: string; fields: string[] } {
  const text = new TextDecoder();
  let reason: string | undefined;
  const fields: string[] = [];
  for (const detail of error.details) {
    // Details the server sent arrive as bytes with their type name.
    if (!("type" in detail) || typeof detail.type !== "string" || !(detail.value instanceof Uint8Array)) continue;
    try {
      if (detail.type === "google.rpc.ErrorInfo") {
        // ErrorInfo { string reason = 1; ... }
        const [value] = fieldsOf(detail.value, 1);
        if (value) reason = text.decode(value);
      } else if (detail.type === "google.rpc.BadRequest") {
        // BadRequest { repeated FieldViolation field_violations = 1; } FieldViolation { string field = 1; ... }
        for (const violation of fieldsOf(detail.value, 1)) {
          for (const field of fieldsOf(violation, 1)) fields.push(text.decode(field));
        }
      }
    } catch {
      // Undecodable details say nothing more than the code.
    }
  }
  return { reason, fields };
}

/** What `describe` says of a call that did not reach the server or got no answer: trouble of
 * the connection, which no longer stands once the page is connected again. */
export const CONNECTION_TROUBLE: readonly string[] = [Code.Unavailable, Code.Unknown, Code.DeadlineExceeded]
  .map((code) => BY_CODE[code])
  .filter((text): text is string => text !== undefined);

/** A message for players: what the error means for them, not the server's words for programmers
 * (those only for a code the page does not know). Starts in lower case, without a full stop, to
 * follow "Cannot join: " and the like. */
export function describe(error: unknown): string {
  const e = ConnectError.from(error);
  const { reason, fields } = detailsOf(e);
  if (reason && BY_REASON[reason]) return BY_REASON[reason];
  for (const field of fields) {
    // Without the field's name in front ("invalid display_name: "), which is for programmers.
    if (IN_THE_SERVERS_WORDS.has(field) && e.rawMessage) return e.rawMessage.replace(/^invalid [a-z_.]+: /, "");
    // "rules.rule_set.max_plies" is about the rules as much as "rules".
    const known = BY_FIELD[field] ?? BY_FIELD[field.split(".")[0]];
    if (known) return known;
  }
  return BY_CODE[e.code] ?? (e.rawMessage || e.message);
}

// What the browser keeps: the account's API key, the name, and each seat's token (the only
// way to move in that game, so kept until the game is long over, or until the account whose
// seat it is signs out).
const KEY = "oanquan.apiKey";
/** The `localStorage` item of the API key, for a tab that follows another's sign-in or out. */
export const API_KEY_ITEM = KEY;
const NAME = "oanquan.name";
const SEAT = "oanquan.seat.";
// Under SEAT: "oanquan.seat.rematch-of.<finished game>".
const REMATCH = "rematch-of.";

export interface SeatToken {
  token: string;
  seat: number;
  /** Taken while an account was signed in: forgotten when it signs out, so that the next person
   * at a shared computer cannot move for it. */
  account?: boolean;
}

export const store = {
  apiKey: (): string => localStorage.getItem(KEY) ?? "",
  setApiKey(key: string) {
    if (key) localStorage.setItem(KEY, key);
    else localStorage.removeItem(KEY);
  },
  name: (): string => localStorage.getItem(NAME) ?? "",
  setName(name: string) {
    localStorage.setItem(NAME, name);
  },
  seat(gameId: string): SeatToken | undefined {
    const text = localStorage.getItem(SEAT + gameId);
    if (!text) return undefined;
    try {
      const value = JSON.parse(text) as SeatToken;
      return typeof value.token === "string" && typeof value.seat === "number" ? value : undefined;
    } catch {
      return undefined;
    }
  },
  setSeat(gameId: string, seat: SeatToken) {
    // A rematch's seat keeps the mark of the offer it came from, whoever is signed in now.
    const account = seat.account ?? plausibleKey(store.apiKey());
    localStorage.setItem(SEAT + gameId, JSON.stringify({ ...seat, account }));
  },
  /** Forgets the API key and every seat taken with it; anonymous seats stay. */
  signOut() {
    // The seats go first: another tab that sees the key go reads them gone too.
    const seats = Array.from({ length: localStorage.length }, (_, i) => localStorage.key(i) ?? "").filter((key) =>
      key.startsWith(SEAT),
    );
    for (const key of seats) {
      if (store.seat(key.slice(SEAT.length))?.account) localStorage.removeItem(key);
    }
    store.setApiKey("");
  },
  /** The games this browser keeps a seat in (finished ones too, until they are forgotten). */
  seatGames(): string[] {
    return Array.from({ length: localStorage.length }, (_, i) => localStorage.key(i) ?? "")
      .filter((key) => key.startsWith(SEAT) && !key.startsWith(SEAT + REMATCH))
      .map((key) => key.slice(SEAT.length));
  },
  removeSeat(gameId: string) {
    localStorage.removeItem(SEAT + gameId);
  },
  /** The seat of a rematch offered from this browser in `gameId`, until it starts. */
  pendingRematch(gameId: string): SeatToken | undefined {
    return store.seat(REMATCH + gameId);
  },
  setPendingRematch(gameId: string, seat: SeatToken) {
    store.setSeat(REMATCH + gameId, seat);
  },
};
