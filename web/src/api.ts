// The API over gRPC-Web, from the server that served this page (or VITE_API for `npm run dev`).

import { ConnectError, createClient, type CallOptions, type Client } from "@connectrpc/connect";
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

export function bearer(token: string | undefined, options: CallOptions = {}): CallOptions {
  const withTimeout = { timeoutMs: CALL_TIMEOUT_MS, ...options };
  return token ? { ...withTimeout, headers: { authorization: `Bearer ${token}` } } : withTimeout;
}

/** A message for people: the server's, without the code prefix. */
export function describe(error: unknown): string {
  const e = ConnectError.from(error);
  return e.rawMessage || e.message;
}

// What the browser keeps: the account's API key, the name, and each seat's token (the only
// way to move in that game, so kept until the game is long over).
const KEY = "oanquan.apiKey";
const NAME = "oanquan.name";
const SEAT = "oanquan.seat.";
// Under SEAT: "oanquan.seat.rematch-of.<finished game>".
const REMATCH = "rematch-of.";

export interface SeatToken {
  token: string;
  seat: number;
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
    localStorage.setItem(SEAT + gameId, JSON.stringify(seat));
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
