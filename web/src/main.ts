// The page: a lobby (#/) and a game (#/game/ID), plain DOM, no framework.

import "./style.css";

import { create } from "@bufbuild/protobuf";
import { durationFromMs, durationMs, timestampMs } from "@bufbuild/protobuf/wkt";

import { Code, ConnectError } from "@connectrpc/connect";
import { API_KEY_ITEM, CONNECTION_TROUBLE, accounts, bearer, describe, games, plausibleKey, rules, store } from "./api.js";
import { timeControlText } from "./format.js";
import { Speed, type PlayerProfile, type Rating } from "./gen/oanquan/v1/account_pb.js";
import {
  GameEvent_DrawAction,
  GameEvent_RematchAction,
  GameStatus,
  PlayerKind,
  TimeControlSchema,
  type Clocks,
  type Game,
  type GameEvent,
  type MoveRecord,
  type RatingChange,
  type Seek,
  type SeatAccount,
} from "./gen/oanquan/v1/game_pb.js";
import { Direction, EndReason, Outcome, Player, type Step } from "./gen/oanquan/v1/rules_pb.js";

const app = document.getElementById("app")!;
const statusLine = document.getElementById("status")!;

/** Creates an element with attributes and children. */
function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | undefined> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child != null) element.append(child);
  return element;
}

/** While the viewer's own clock runs, moves are shown at once in their last 30 seconds, and
 * animated on at most a twentieth of the time beyond (see `stepDelay`). */
const ANIMATION_RESERVE_MS = 30_000;

function button(label: string, testid: string, onClick: () => void, attrs: Record<string, string> = {}) {
  const b = h("button", { type: "button", "data-testid": testid, ...attrs }, label);
  b.addEventListener("click", onClick);
  return b;
}

/** The rules in a few lines, for a first game; RULES.md (and the README) say it all. */
function howToPlay(): HTMLDetailsElement {
  const item = (text: string) => h("li", {}, text);
  return h(
    "details",
    { class: "how-to-play", "data-testid": "how-to-play" },
    h("summary", {}, "How to play"),
    h(
      "ul",
      {},
      item("Your five squares are the row nearest you; the big squares at the ends are the mandarin squares."),
      item(
        "On your turn, pick one of your squares that holds stones and a direction. Its stones are sown one by one into the squares that follow.",
      ),
      item(
        "If the square after the last stone holds stones, they are picked up and sown on; if it is a mandarin square, the turn ends.",
      ),
      item(
        "If it is empty, you capture the square after it; after another empty square, the next one too, and so on. Two empty squares in a row end the turn.",
      ),
      item(
        "If all five of your squares are empty when your turn starts, one of your captured stones goes back on each (borrowed if you have none).",
      ),
      item(
        "The game ends when both mandarin squares have been captured: each player takes the stones left on their own row, and more stones wins. A mandarin stone counts one; a mandarin piece (mancala-world) counts ten.",
      ),
      item(
        "A position seen for the third time, or the 300th move, also ends the game; stones still in the mandarin squares are then shared.",
      ),
      item(
        "Presets: standard does not let the game's first move capture a mandarin square. Traditional has no such protection, and an empty mandarin square after the last stone counts as an empty square. Mancala-world has a mandarin piece worth ten in each mandarin square, no protection, and ends when both pieces are captured.",
      ),
    ),
  );
}

/** A direction button: its arrow is drawn, not read; render() names the square it sows. */
function directionButton(side: "left" | "right", arrow: string, onClick: () => void) {
  const glyph = h("span", { "aria-hidden": "true" }, arrow);
  const b = button("", `dir-${side}`, onClick, { "data-side": side, "aria-label": `Sow to the ${side}` });
  if (side === "left") b.append(glyph, " left");
  else b.append("right ", glyph);
  return b;
}

function say(text: string, kind: "info" | "error" | "" = "info") {
  // An error's description starts in lower case, to follow a "Cannot join: "; alone, it starts a sentence.
  statusLine.textContent = text.charAt(0).toUpperCase() + text.slice(1);
  statusLine.className = `status ${kind}`;
}

/** The endings of the status line's notices of an opponent's offer. */
const OFFERS_DRAW = " offers a draw";
const OFFERS_REMATCH = " offers a rematch";

/** The lobby's notice while its stream is away. */
const LOBBY_AWAY = "Reconnecting to the lobby…";
/** The most waiting games a lobby snapshot holds (game.proto, LobbyEvent.Snapshot). */
const LOBBY_CAP = 200;

/** The ending of the status line's error for a move that never reached the server. */
const NOT_SENT_ENDING = "; play it again once the page is connected";

/** Clears the status line if it still announces an offer that is gone. */
function withdrawNotice(ending: string) {
  if (statusLine.textContent?.endsWith(ending)) say("");
}

/** Clears an error that blamed the connection, once the page is connected again: an outside
 * probe's "No answer from the server" after a draw accepted during an outage stayed beside
 * "Your turn" for good. Returns whether it did. */
function withdrawConnectionTrouble(): boolean {
  const text = (statusLine.textContent ?? "").toLowerCase();
  const trouble =
    statusLine.classList.contains("error") && CONNECTION_TROUBLE.some((words) => text.endsWith(words));
  if (trouble) say("");
  return trouble;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------- dead streams

/**
 * How long a stream may stay silent before the page counts its connection dead. A network that
 * stops forwarding without closing (a Wi-Fi switch, a NAT timeout) ends no stream: without this
 * the page would show an old game for ever. The server sends a heartbeat on every idle stream
 * (every 15 s by default): 2.5 times that lets one heartbeat be late or lost.
 *
 * The browser tests shorten it by setting `window.oanquanStreamSilenceMs` before the page loads
 * (an init script), to see a silent stream dropped without waiting 40 s.
 */
const STREAM_SILENCE_MS = (window as { oanquanStreamSilenceMs?: number }).oanquanStreamSilenceMs ?? 40_000;

/**
 * How long a new attempt waits for the server's first answer (its headers or a message). The
 * server answers every stream at once (a snapshot, the missed events, or a heartbeat when
 * nothing was missed), so silence this long means the request went out on a connection as
 * dead as the last one (a browser reuses its pooled connection): an outside probe's page took
 * a second 40 s to find that out.
 */
const FIRST_ANSWER_MS = Math.min(10_000, STREAM_SILENCE_MS);

/**
 * A signal for one attempt of a long-lived stream, aborted with the page's `outer` signal, or
 * once nothing arrived for FIRST_ANSWER_MS at first and STREAM_SILENCE_MS after that: call
 * `alive()` on the response headers and on every message, and `stop()` when the attempt
 * ends. `silent()` tells a dropped stream from an error.
 */
function watchdog(outer: AbortSignal) {
  const controller = new AbortController();
  let silent = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (ms: number) => {
    clearTimeout(timer);
    // Ended or dropped already: nothing more to watch.
    if (controller.signal.aborted) return;
    timer = setTimeout(() => {
      silent = true;
      controller.abort();
    }, ms);
  };
  const alive = () => arm(STREAM_SILENCE_MS);
  const stop = () => {
    clearTimeout(timer);
    outer.removeEventListener("abort", stop);
    controller.abort();
  };
  outer.addEventListener("abort", stop);
  // Waiting for the first answer counts too, for less: a request lost on the way has none.
  arm(FIRST_ANSWER_MS);
  return { signal: controller.signal, alive, stop, silent: () => silent };
}

/** Whether a stream's response headers open a stream: a refusal comes as "trailers only",
 * its grpc-status in the headers. */
const opensStream = (headers: Headers) => !headers.has("grpc-status");

// ---------------------------------------------------------------- account bar

const nameInput = document.getElementById("name") as HTMLInputElement;
const keyInput = document.getElementById("apikey") as HTMLInputElement;
const meLine = document.getElementById("me")!;
const signOutButton = document.getElementById("signout") as HTMLButtonElement;
/** Sent on `window` once a sign-in is answered. */
const SIGNED_IN = "oanquan:signed-in";
nameInput.value = store.name();
keyInput.value = store.apiKey();
/** A game's page: `#/game/ID`, the id letters, digits, - and _. */
const GAME_ROUTE = /^#\/game\/([A-Za-z0-9_-]+)$/;

/** Whether the page shows a game (whose seats an account change may change). */
const onGamePage = () => GAME_ROUTE.test(location.hash);

/** The key whose account this page was last drawn for. */
let shownKey = store.apiKey();
/** The most characters a name has on the server (game's text.rs), counted as it counts them. */
const MAX_NAME_CHARS = 32;
nameInput.addEventListener("change", () => {
  store.setName(nameInput.value.trim());
  // Said as the name is typed, not after Create (an outside probe's 128-character name).
  const chars = [...nameInput.value.normalize("NFC").trim()].length;
  if (chars > MAX_NAME_CHARS) {
    say(`Your name is ${chars} characters long; a name has at most ${MAX_NAME_CHARS}.`, "error");
  }
});
document.getElementById("account")!.addEventListener("submit", (event) => {
  event.preventDefault();
  store.setName(nameInput.value.trim());
  // Another key, or none, is the account signing out first: its seats go with it (an outside
  // probe emptied the field and pressed Sign in, and the account's seats stayed playable).
  const key = keyInput.value.trim();
  const switched = !!store.apiKey() && key !== store.apiKey();
  if (switched) store.signOut();
  store.setApiKey(key);
  shownKey = key;
  // The game on screen may have been the account's: drawn again as its seats now stand (an
  // outside probe signed in as another account and went on moving for the first).
  if (switched && onGamePage()) route();
  // The lobby shows the account's own provisional rating: it redraws once the account is known.
  void showMe().then(async () => {
    // An error on the status line may have said to sign in ("rated games need an account"):
    // signed in, it no longer stands (an outside probe saw it beside the account's name).
    if ((await myProfile) && statusLine.classList.contains("error")) say("");
    window.dispatchEvent(new Event(SIGNED_IN));
  });
});
// Another tab of this browser signed in or out. Signed out, the account's seats are gone from
// the browser, but a game on screen here still held its seat in memory and moved for the
// account (an outside probe's second tab did): it is drawn again as a stranger sees it.
window.addEventListener("storage", (event) => {
  if (event.key === API_KEY_ITEM || event.key === null) accountChanged();
});
signOutButton.addEventListener("click", () => {
  store.signOut();
  accountChanged();
});

/** Shows the account now stored. Signed out, a game on screen may be one of the account's, its
 * seat now forgotten: the page is drawn again as the next person at this computer sees it. */
function accountChanged() {
  keyInput.value = store.apiKey();
  // Signed out, or another account signed in (which signs the first out): the game on screen
  // is drawn again as its seats now stand.
  const changed = store.apiKey() !== shownKey;
  const signedOut = !store.apiKey();
  shownKey = store.apiKey();
  void showMe().then(() => {
    // A lobby keeps what is typed in its form; a game is drawn again as its seats now stand.
    if (signedOut || (changed && onGamePage())) route();
    window.dispatchEvent(new Event(SIGNED_IN));
  });
}

/** The signed-in account's profile (undefined when anonymous or refused), for the lobby too. */
let myProfile: Promise<PlayerProfile | undefined> = Promise.resolve(undefined);
/** The signed-in account's username once known, for what must be drawn at once. */
let myUsername: string | undefined;

/** Whether this browser plays in `game`: by a seat it keeps, or as the account signed in
 * (another browser of the same account made the game; an outside probe's lobby offered it
 * to join, and joining said someone else had the seat). */
function playsIn(game: Game): boolean {
  if (store.seat(game.id)) return true;
  return (
    !!myUsername &&
    [game.firstSeat, game.secondSeat].some(
      (seat) => seat?.occupied && seat.kind !== PlayerKind.COMPUTER && seat.account?.username === myUsername,
    )
  );
}

function showMe(): Promise<void> {
  const key = store.apiKey();
  signOutButton.hidden = !key;
  meLine.title = "";
  myUsername = undefined;
  if (!key) {
    meLine.textContent = "anonymous";
    myProfile = Promise.resolve(undefined);
    return Promise.resolve();
  }
  if (!plausibleKey(key)) {
    meLine.textContent = "not signed in: that API key is not valid (mistyped: it holds characters no key has)";
    myProfile = Promise.resolve(undefined);
    return Promise.resolve();
  }
  const asked = accounts.getMe({}, bearer(key)).then((me) => me.player);
  myProfile = asked.catch(() => undefined);
  return asked.then(
    (player) => {
      if (store.apiKey() === key) myUsername = player?.username;
      const rating = player?.ratings.map((r) => `${Speed[r.speed].toLowerCase()} ${ratingText(r)}`).join(", ");
      meLine.textContent = `${player?.username ?? "?"}${rating ? ` (${rating})` : ""}`;
      meLine.title = player?.ratings.some((r) => r.provisional) ? "? = provisional rating" : "";
    },
    (error: unknown) => {
      meLine.textContent = `not signed in: ${describe(error)}`;
    },
  );
}

const displayName = () => store.name() || "Guest";
// A key no server made is not sent: the account bar says why it is not signed in.
const apiKey = () => (plausibleKey(store.apiKey()) ? store.apiKey() : undefined);

/** Keeps the seat a call took, sent with `key` (the API key, if any): the account's seat if it
 * was sent with one, and not kept at all if that account signed out while the call was on its
 * way (an outside probe's sign-out during a CreateGame left the account's seat in the browser,
 * marked as anonymous). Whether it was kept. */
function keepSeat(gameId: string, seat: { token: string; seat: number }, key: string | undefined): boolean {
  if (key && store.apiKey() !== key) {
    say("You signed out while the seat was being taken: it was not kept in this browser.", "error");
    return false;
  }
  store.setSeat(gameId, { ...seat, account: !!key });
  return true;
}

// ---------------------------------------------------------------- formatting

/** A rating as the API says to show it: with a "?" while provisional. */
const ratingText = (r: Pick<Rating, "rating" | "provisional">) => `${r.rating}${r.provisional ? "?" : ""}`;
/** The rating an account sat down with, "?" if it was provisional; none in an untimed game (0). */
const seatRating = (account: SeatAccount | undefined) => (account?.rating ? ratingText(account) : "");

function formatMs(ms: number): string {
  const clamped = Math.max(0, ms);
  // Correspondence clocks hold days: "1d 00:00" (days, hours, minutes), not "1440:00".
  if (clamped >= 3_600_000) {
    const total = Math.floor(clamped / 1000);
    const [days, hours, minutes, seconds] = [total / 86_400, (total % 86_400) / 3600, (total % 3600) / 60, total % 60].map(Math.floor);
    const two = (n: number) => n.toString().padStart(2, "0");
    return days > 0 ? `${days}d ${two(hours)}:${two(minutes)}` : `${hours}:${two(minutes)}:${two(seconds)}`;
  }
  const minutes = Math.floor(clamped / 60_000);
  const seconds = Math.floor((clamped % 60_000) / 1000);
  if (clamped < 10_000) return `0:0${seconds}.${Math.floor((clamped % 1000) / 100)}`;
  return `${minutes}:${seconds.toString().padStart(2, "0")}`;
}

const REASONS: Record<number, string> = {
  [EndReason.MANDARINS]: "both mandarin squares are empty",
  [EndReason.REPETITION]: "repetition",
  [EndReason.PLY_LIMIT]: "the move limit",
  [EndReason.RESIGNATION]: "resignation",
  [EndReason.ABORTED]: "aborted",
  [EndReason.TIMEOUT]: "time ran out",
  [EndReason.AGREEMENT]: "agreed draw",
  [EndReason.ABANDONMENT]: "abandonment",
};

/** The computer's levels by the names the server and the command-line client give them
 * (`Computer (club)`), so that one seat reads the same in both. */
const LEVEL_NAMES = ["random", "greedy", "novice", "casual", "club", "expert", "master"];
const levelName = (level: number) => LEVEL_NAMES[level - 1] ?? `level ${level}`;

/** How a player moves: the arrow keys act on the square chosen, not on one only focused. */
const PICK_HINT = "Pick one of your squares (click it, or Enter), then a direction (a button, or ←/→).";

/** When a game was created, in milliseconds (0 if the server did not say). */
const created = (game: Game) => (game.createTime ? timestampMs(game.createTime) : 0);

/** Right-to-left letters (Hebrew, Arabic, Syriac, Thaana, N'Ko, their presentation forms). */
const RTL = /[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]/;

/** A player's name that holds right-to-left letters, isolated from the text around it (FSI …
 * PDI): otherwise a score or a digit beside it joins its run, and an outside probe's result
 * line read "0 2 عمر" for "عمر 2 0". Names in one direction are left as they are. */
const isolated = (name: string) => (RTL.test(name) ? `\u2068${name}\u2069` : name);

function seatName(game: Game, player: Player): string {
  const seat = player === Player.FIRST ? game.firstSeat : game.secondSeat;
  if (!seat?.occupied) return "(open)";
  // In brackets, which no other player's name may end in: nobody can pass for the computer.
  if (seat.kind === PlayerKind.COMPUTER) return `Computer (${levelName(seat.computerLevel)})`;
  const username = seat.account?.username;
  if (!username) return isolated(seat.displayName || "?");
  // An account's seat is named after it: the username once, with the rating it sat down with.
  const rating = seatRating(seat.account);
  if (seat.displayName === username) return rating ? `${isolated(username)} (${rating})` : isolated(username);
  return `${isolated(seat.displayName || "?")} [${isolated(username)}${rating ? ` ${rating}` : ""}]`;
}

/** How the game ended, naming who ended it where one did, and each side's score by name (the
 * winner of a game lost on time or by resignation may have the lower score). */
function resultText(game: Game, firstMoveMissed?: boolean): string {
  const result = game.result;
  if (!result) return "";
  const reason = REASONS[result.endReason] ?? "";
  const endedBy = result.endedBy === Player.FIRST || result.endedBy === Player.SECOND ? result.endedBy : undefined;
  const scores = result.scores
    ? ` · ${seatName(game, Player.FIRST)} ${result.scores.first}, ${seatName(game, Player.SECOND)} ${result.scores.second}`
    : "";
  if (result.outcome === Outcome.DRAW) return `Draw (${reason})${scores}${ratingChangesText(game)}`;
  // An aborted game has no winner: the outcome is unset.
  if (result.outcome !== Outcome.FIRST_WINS && result.outcome !== Outcome.SECOND_WINS) {
    // Which of the two, where this page saw it happen (the game's end against the first
    // move's deadline, both the server's times); after a reload it cannot tell.
    const what =
      firstMoveMissed === undefined
        ? "aborted the game or missed the first move's deadline"
        : firstMoveMissed
          ? "did not make their first move in time"
          : "aborted the game";
    const by = endedBy === undefined ? "" : `: ${seatName(game, endedBy)} ${what}`;
    return `No result (${reason || "ended"})${by}`;
  }
  const winner = result.outcome === Outcome.FIRST_WINS ? Player.FIRST : Player.SECOND;
  let how = reason;
  if (endedBy !== undefined) {
    const who = seatName(game, endedBy);
    if (result.endReason === EndReason.TIMEOUT) how = `${who} ran out of time`;
    else if (result.endReason === EndReason.RESIGNATION) how = `${who} resigned`;
    else if (result.endReason === EndReason.ABANDONMENT) how = `${who} left the game`;
  }
  return `${seatName(game, winner)} wins (${how})${scores}${ratingChangesText(game)}`;
}

/** A rated result's rating changes, " · ratings: Lan 1500 → 1516, Minh 1500 → 1484", by
 * username: the seats' names carry the ratings they sat down with, which the result changed. */
function ratingChangesText(game: Game): string {
  const { firstRating, secondRating } = game.result ?? {};
  // A rated game that changed no rating says so, and why (game.proto, GameResult): a player
  // could not tell otherwise whether it counted.
  if (game.rated && (!firstRating || !secondRating)) {
    return (game.moveCount ?? 0) < 2
      ? " · ratings unchanged (the game ended before both players moved)"
      : " · ratings unchanged (these two accounts have played their rated games of the day at this speed)";
  }
  if (!firstRating || !secondRating) return "";
  const change = (player: Player, r: RatingChange) => {
    const seat = player === Player.FIRST ? game.firstSeat : game.secondSeat;
    const name = seat?.account?.username ? isolated(seat.account.username) : seatName(game, player);
    return `${name} ${r.before} → ${ratingText({ rating: r.after, provisional: r.provisional })}`;
  };
  return ` · ratings: ${change(Player.FIRST, firstRating)}, ${change(Player.SECOND, secondRating)}`;
}

/** A move in words, for a screen reader: "Minh played their square 3 and captured 6 stones.
 * Your turn." Squares are counted 1-5 from the mover's own left, as moves are given. */
function moveSentence(game: Game, record: MoveRecord, viewer: Player): string {
  const square = record.move?.square ?? 0;
  const number = square >= 7 ? square - 6 : square;
  let stones = 0;
  let mandarins = 0;
  for (const step of record.steps) {
    if (step.kind.case === "capture") {
      stones += step.kind.value.stones;
      mandarins += step.kind.value.pieces;
    }
  }
  const took = [stones > 0 ? `${stones} ${stones === 1 ? "stone" : "stones"}` : "", mandarins > 0 ? "a mandarin" : ""]
    .filter(Boolean)
    .join(" and ");
  const yours = viewer !== Player.UNSPECIFIED && record.position?.toMove === viewer && !record.position?.over;
  return `${seatName(game, record.player)} played their square ${number}${took ? ` and captured ${took}` : ""}.${yours ? " Your turn." : ""}`;
}

// ---------------------------------------------------------------- routing

let leave: (() => void) | undefined;

function route() {
  leave?.();
  leave = undefined;
  app.replaceChildren();
  // What the last page said is about that page.
  say("");
  const match = GAME_ROUTE.exec(location.hash);
  const profile = /^#\/player\/([^/]+)$/.exec(location.hash);
  if (match) leave = showGame(match[1]);
  else if (location.hash.startsWith("#/game/")) {
    // A game id is letters, digits, - and _: a link with anything else names no game.
    leave = showLobby();
    say("There is no such game", "error");
  }
  else if (profile) {
    // A hand-made link may not decode (`#/player/%`): the lobby then, not an empty page.
    let username: string | undefined;
    try {
      username = decodeURIComponent(profile[1]);
    } catch {
      username = undefined;
    }
    leave = username === undefined ? showLobby() : showProfile(username);
  } else leave = showLobby();
}

window.addEventListener("hashchange", route);

const profileHref = (username: string) => `#/player/${encodeURIComponent(username)}`;

/** A username that opens its profile. */
function playerLink(username: string, text: string = username): HTMLAnchorElement {
  return h("a", { href: profileHref(username), class: "player-link", "data-testid": "player-link" }, isolated(text));
}

/** A seat's name, its account part a link to the profile. */
function seatLabel(game: Game, player: Player): (Node | string)[] {
  const seat = player === Player.FIRST ? game.firstSeat : game.secondSeat;
  const username = seat?.occupied && seat.kind !== PlayerKind.COMPUTER ? seat.account?.username : undefined;
  if (!username) return [seatName(game, player)];
  const rating = seatRating(seat?.account);
  if (seat?.displayName === username) return [playerLink(username), rating ? ` (${rating})` : ""];
  return [`${isolated(seat?.displayName || "?")} [`, playerLink(username), `${rating ? ` ${rating}` : ""}]`];
}

function openGame(id: string) {
  location.hash = `#/game/${id}`;
}

/** Takes the free seat of a game waiting for players, under the name (or the account) of this
 * browser, and keeps its token; says why not if the server refuses. */
async function takeSeat(id: string): Promise<boolean> {
  try {
    const key = apiKey();
    const response = await games.joinGame({ gameId: id, displayName: displayName() }, bearer(key));
    return keepSeat(id, { token: response.playerToken, seat: response.seat }, key);
  } catch (error) {
    say(`Cannot join: ${describe(error)}`, "error");
    return false;
  }
}

// ---------------------------------------------------------------- lobby

const TIME_CONTROLS: [string, string][] = [
  ["", "Untimed"],
  ["15000+0", "15 seconds"],
  ["60000+1000", "1+1"],
  ["180000+2000", "3+2"],
  ["300000+3000", "5+3"],
  ["600000+5000", "10+5"],
  ["c86400000", "1 day a move"],
];

function timeControlOf(value: string) {
  if (!value) return undefined;
  if (value.startsWith("c")) {
    return create(TimeControlSchema, {
      kind: { case: "correspondence", value: { perMove: durationFromMs(Number(value.slice(1))) } },
    });
  }
  const [initial, increment] = value.split("+").map(Number);
  return create(TimeControlSchema, {
    kind: {
      case: "realTime",
      value: { initial: durationFromMs(initial), increment: durationFromMs(increment) },
    },
  });
}

function select(id: string, options: [string, string][]): HTMLSelectElement {
  const element = h("select", { id, "data-testid": id });
  for (const [value, label] of options) element.append(h("option", { value }, label));
  return element;
}

function showLobby(): () => void {
  const abort = new AbortController();
  const preset = select("preset", [["standard", "standard"]]);
  const time = select("time-control", TIME_CONTROLS);
  const opponent = select("opponent", [
    ["", "A person"],
    ...[1, 2, 3, 4, 5, 6, 7].map((level): [string, string] => [
      String(level),
      `Computer, level ${level}: ${levelName(level)}`,
    ]),
  ]);
  const rated = h("input", { type: "checkbox", id: "rated", "data-testid": "rated" });
  const seekState = h("span", { "data-testid": "seek-state" });
  const openList = h("ul", { class: "list", "data-testid": "open-games" });
  const activeList = h("ul", { class: "list", "data-testid": "active-games" });
  const seekList = h("ul", { class: "list", "data-testid": "seeks" });
  const leaders = h("ol", { class: "list", "data-testid": "leaderboard" });
  // The signed-in player's own rating when it is provisional: the leaderboard leaves it out.
  const ownRating = h("p", { class: "hint", "data-testid": "own-rating", hidden: true });
  // A rating is per speed, and the server wants one: blitz first, as most rated games are.
  const leaderSpeed = select("leaderboard-speed", [
    [String(Speed.BLITZ), "Blitz"],
    [String(Speed.BULLET), "Bullet"],
    [String(Speed.RAPID), "Rapid"],
    [String(Speed.CLASSICAL), "Classical"],
    [String(Speed.CORRESPONDENCE), "Correspondence"],
  ]);
  leaderSpeed.setAttribute("aria-label", "Leaderboard speed");
  let seeking: AbortController | undefined;
  // This page's open seek, which the list shows as its own.
  let ownSeek: string | undefined;

  void rules.listPresets({}, bearer(undefined)).then(
    (response) => {
      preset.replaceChildren(
        ...response.presets.map((p) => h("option", { value: p.name, title: p.description }, p.name)),
      );
      preset.value = "standard";
    },
    () => {},
  );

  const rulesSpec = () => ({ kind: { case: "preset" as const, value: preset.value } });

  /** A creation on its way: more clicks meanwhile make no more games (an outside probe's
   * triple click left three waiting). */
  let creating = false;

  async function createGame() {
    if (creating) return;
    creating = true;
    try {
      const level = Number(opponent.value);
      const key = apiKey();
      const response = await games.createGame(
        {
          rules: rulesSpec(),
          displayName: displayName(),
          computer: level ? { level } : undefined,
          timeControl: timeControlOf(time.value),
          rated: rated.checked,
        },
        bearer(key),
      );
      // Not kept: the lobby stays, with the reason on its status line.
      if (keepSeat(response.game!.id, { token: response.playerToken, seat: response.seat }, key)) {
        openGame(response.game!.id);
      }
    } catch (error) {
      say(`Cannot create the game: ${describe(error)}`, "error");
    } finally {
      creating = false;
    }
  }

  async function seek() {
    if (seeking) {
      seeking.abort();
      return;
    }
    // A seek lost in silence waits on the server until it notices, and a new one would be
    // paired with it: a game against a seat nobody holds (an outside probe's "Carol – Carol").
    if (ownSeek && seeks.has(ownSeek)) {
      say(
        "Your last seek, lost with the connection, still waits on the server until it notices (up to a minute); seek again once it has left the list.",
        "error",
      );
      return;
    }
    seeking = new AbortController();
    seekButton.textContent = "Cancel seek";
    seekState.textContent = "looking for an opponent…";
    // A seek is not resumable (a new one would be another seek): a silent one ends, and says so.
    const dog = watchdog(seeking.signal);
    const seekKey = apiKey();
    try {
      const stream = games.seek(
        {
          rules: rulesSpec(),
          timeControl: timeControlOf(time.value),
          displayName: displayName(),
          rated: rated.checked,
        },
        { ...bearer(seekKey), timeoutMs: undefined, signal: dog.signal, onHeader: dog.alive },
      );
      for await (const response of stream) {
        dog.alive();
        if (response.kind.case === "waiting") {
          ownSeek = response.kind.value.id;
          render();
        }
        if (response.kind.case === "paired") {
          const paired = response.kind.value;
          seeking = undefined;
          if (keepSeat(paired.game!.id, { token: paired.playerToken, seat: paired.seat }, seekKey)) {
            openGame(paired.game!.id);
          }
          return;
        }
      }
    } catch (error) {
      if (dog.silent()) say("The seek was lost with the connection; seek again.", "error");
      else if (!seeking?.signal.aborted) say(`Seek failed: ${describe(error)}`, "error");
    } finally {
      dog.stop();
    }
    // Lost in silence, the seek waits on the server until it notices (up to a minute), and the
    // list shows it meanwhile: still this page's, not one to play (an outside probe's own lost
    // seek had a Play button).
    if (!dog.silent()) ownSeek = undefined;
    seeking = undefined;
    seekButton.textContent = "Seek";
    seekState.textContent = "";
    seekFor();
    render();
  }

  async function join(id: string) {
    if (await takeSeat(id)) openGame(id);
  }

  async function accept(seekId: string) {
    try {
      const key = apiKey();
      const response = await games.acceptSeek({ seekId, displayName: displayName() }, bearer(key));
      if (keepSeat(response.game!.id, { token: response.playerToken, seat: response.seat }, key)) {
        openGame(response.game!.id);
      }
    } catch (error) {
      say(`Cannot accept the seek: ${describe(error)}`, "error");
    }
  }

  const seekButton = button("Seek", "seek", () => void seek());
  // A seek finds a person (the Opponent menu's computer is played with Create game): said
  // beside the button rather than a person's seek made without a word (an outside probe's).
  const seekFor = () => {
    if (seeking) return;
    const computer = !!Number(opponent.value);
    seekButton.disabled = computer;
    seekState.textContent = computer ? "a seek finds a person: to play the computer, Create game" : "";
  };
  opponent.addEventListener("change", seekFor);
  app.append(
    h(
      "section",
      { class: "card" },
      h("h2", {}, "New game"),
      h(
        "div",
        { class: "form" },
        h("label", {}, "Rules ", preset),
        h("label", {}, "Clock ", time),
        h("label", {}, "Opponent ", opponent),
        h("label", {}, rated, " rated (needs an API key and a clock)"),
      ),
      h(
        "div",
        { class: "actions" },
        button("Create game", "create-game", () => void createGame()),
        seekButton,
        seekState,
      ),
    ),
    h("section", { class: "card" }, h("h2", {}, "Open games"), openList),
    h("section", { class: "card" }, h("h2", {}, "Seeks"), seekList),
    h("section", { class: "card" }, h("h2", {}, "Games being played"), activeList),
    h("section", { class: "card" }, h("h2", {}, "Leaderboard"), leaderSpeed, leaders, ownRating),
  );

  const known = new Map<string, Game>();
  const seeks = new Map<string, Seek>();
  /** Whether a snapshot has come: before it, "none" would be a guess. */
  let loaded = false;
  /** Whether the last snapshot held as many waiting games as the server sends (the newest). */
  let openCut = false;
  /** Games this browser held a seat in that are over: not asked for again. */
  const overHere = new Set<string>();

  /** The games this browser plays in that the snapshot left out (it holds only the newest
   * 200 of each kind): asked for one by one, so one's own game stays listed however many
   * others are made (an outside probe's 210 new games hid it). */
  async function findOwn() {
    for (const id of store.seatGames()) {
      if (known.has(id) || overHere.has(id) || abort.signal.aborted) continue;
      try {
        const game = (await games.getGame({ gameId: id }, bearer(undefined))).game;
        if (game?.status === GameStatus.WAITING_FOR_PLAYERS || game?.status === GameStatus.ACTIVE) {
          known.set(id, game);
          render();
        } else overHere.add(id);
      } catch (error) {
        const code = ConnectError.from(error).code;
        if (code === Code.NotFound) overHere.add(id);
        // Over the rate limit: the next snapshot asks again, rather than this one spending more.
        if (code === Code.ResourceExhausted) return;
      }
    }
  }

  function render() {
    // Newest first, as the snapshot lists them: a game created while the page is open goes on
    // top, where a reload would put it.
    const newestFirst = [...known.values()].sort((a, b) => created(b) - created(a));
    const open = newestFirst.filter((g) => g.status === GameStatus.WAITING_FOR_PLAYERS);
    const active = newestFirst.filter((g) => g.status === GameStatus.ACTIVE);
    openList.replaceChildren(
      ...open.map((g) => {
        const host = seatName(g, g.firstSeat?.occupied ? Player.FIRST : Player.SECOND);
        // With the rules and clock: one player's games side by side still read apart.
        const which = `${host}'s game, ${g.preset}, ${timeControlText(g)}`;
        // Named for a screen reader by the game they act on: a list of "Join" buttons
        // otherwise reads as one button many times.
        return h(
          "li",
          { "data-game": g.id },
          h("span", {}, `${host} · ${g.preset} · ${timeControlText(g)}${g.rated ? " · rated" : ""}`),
          // One's own game is opened, not joined or watched: both would open it anyway.
          ...(playsIn(g)
            ? [button("Open", "open", () => openGame(g.id), { "aria-label": `Open ${which}` })]
            : [
                button("Join", "join", () => void join(g.id), { "aria-label": `Join ${which}` }),
                button("Watch", "watch", () => openGame(g.id), { "aria-label": `Watch ${which}` }),
              ]),
        );
      }),
    );
    if (!loaded) openList.append(h("li", { class: "empty" }, "not loaded yet"));
    else if (open.length === 0) openList.append(h("li", { class: "empty" }, "none: create one"));
    else if (openCut) {
      openList.append(h("li", { class: "empty", "data-testid": "open-cut" }, "the newest are shown; older games wait too"));
    }
    activeList.replaceChildren(
      ...active.map((g) => {
        const players = `${seatName(g, Player.FIRST)} – ${seatName(g, Player.SECOND)}`;
        // With the rules and clock, as the open games' buttons: one pair's games read apart.
        const which = `${players}, ${g.preset}, ${timeControlText(g)}`;
        return h(
          "li",
          { "data-game": g.id },
          h("span", {}, `${players} · ${timeControlText(g)}`),
          // A game this page holds a seat in is played from here, not watched.
          playsIn(g)
            ? button("Play", "play", () => openGame(g.id), { "aria-label": `Play your game ${which}` })
            : button("Watch", "watch", () => openGame(g.id), { "aria-label": `Watch ${which}` }),
        );
      }),
    );
    if (active.length === 0) activeList.append(h("li", { class: "empty" }, loaded ? "none" : "not loaded yet"));
    seekList.replaceChildren(
      ...[...seeks.values()].map((s) =>
        h(
          "li",
          { "data-seek": s.id },
          h("span", {}, `${isolated(s.displayName)} · ${s.preset} · ${timeControlText(s)}${s.rated ? " · rated" : ""}`),
          // Accepting one's own seek would seat this page against itself.
          s.id === ownSeek
            ? h("span", { class: "own", "data-testid": "own-seek" }, "yours")
            : button("Play", "accept-seek", () => void accept(s.id), {
                "aria-label": `Play ${isolated(s.displayName)}'s seek, ${s.preset}, ${timeControlText(s)}`,
              }),
        ),
      ),
    );
    if (seeks.size === 0) seekList.append(h("li", { class: "empty" }, loaded ? "none" : "not loaded yet"));
  }

  async function followLobby() {
    let after: bigint | undefined;
    let delay = 250;
    // Whether the status line says the lobby is away: the next event clears that, and only
    // that (a player's own error stays until they act again).
    let away = false;
    // Back once the server answers: its headers, or any message.
    const back = () => {
      if (away) {
        away = false;
        // Its own notice only: a player's error (a seek lost with the connection) stays.
        withdrawNotice(LOBBY_AWAY);
      }
    };
    while (!abort.signal.aborted) {
      const dog = watchdog(abort.signal);
      try {
        const stream = games.watchLobby(
          { afterSequence: after },
          {
            signal: dog.signal,
            onHeader: (headers) => {
              dog.alive();
              if (opensStream(headers)) back();
            },
          },
        );
        for await (const response of stream) {
          dog.alive();
          const event = response.event;
          if (!event) continue;
          delay = 250;
          back();
          const kind = event.kind;
          switch (kind.case) {
            case "snapshot":
              openList.dataset.live = "true";
              loaded = true;
              known.clear();
              seeks.clear();
              for (const g of kind.value.games) known.set(g.id, g);
              for (const s of kind.value.seeks) seeks.set(s.id, s);
              openCut =
                kind.value.games.filter((g) => g.status === GameStatus.WAITING_FOR_PLAYERS).length >= LOBBY_CAP;
              // A snapshot that holds every open game leaves none of this browser's out: only
              // a cut one is worth a GetGame per kept seat (a browser keeps seats of games long
              // over, and each call counts against its address's rate limit).
              if (
                openCut ||
                kind.value.games.filter((g) => g.status === GameStatus.ACTIVE).length >= LOBBY_CAP
              ) {
                void findOwn();
              }
              break;
            case "gameCreated":
              if (kind.value.game) known.set(kind.value.game.id, kind.value.game);
              break;
            case "seatTaken": {
              const game = known.get(kind.value.gameId);
              if (game) {
                const seat = kind.value.seat === Player.FIRST ? game.firstSeat : game.secondSeat;
                if (seat) {
                  seat.occupied = true;
                  seat.displayName = kind.value.displayName;
                }
              }
              break;
            }
            case "gameStarted": {
              const game = known.get(kind.value.gameId);
              if (game) game.status = GameStatus.ACTIVE;
              break;
            }
            case "gameFinished":
              known.delete(kind.value.gameId);
              break;
            case "seekAdded":
              if (kind.value.seek) seeks.set(kind.value.seek.id, kind.value.seek);
              break;
            case "seekRemoved":
              seeks.delete(kind.value.seekId);
              break;
            case "seekList":
              seeks.clear();
              for (const s of kind.value.seeks) seeks.set(s.id, s);
              break;
          }
          if (kind.case !== "heartbeat" && kind.case !== "snapshot") after = event.sequence;
          if (kind.case === "snapshot") after = event.sequence;
          if (kind.case !== "heartbeat") render();
        }
      } catch {
        if (abort.signal.aborted) return;
      } finally {
        dog.stop();
      }
      say(LOBBY_AWAY, "error");
      away = true;
      await sleep(delay);
      delay = Math.min(delay * 2, 3000);
    }
  }

  render();
  void followLobby();
  const showLeaders = () => {
    const speed = Number(leaderSpeed.value) as Speed;
    return accounts.leaderboard({ speed, pageSize: 10 }, bearer(undefined)).then(
      async (response) => {
        // Provisional ratings are left off (account.proto): an empty list does not mean that
        // nobody has played rated games, so it does not say so.
        leaders.replaceChildren(
          ...(response.entries.length
            ? response.entries.map((e) => h("li", {}, playerLink(e.username), ` ${e.rating?.rating ?? ""}`))
            : [h("li", { class: "empty" }, "no settled ratings yet (provisional ones are not listed)")]),
        );
        const me = await myProfile;
        const own = me?.ratings.find((r) => r.speed === speed && r.provisional);
        ownRating.hidden = !own;
        ownRating.textContent = own
          ? `Your ${SPEED_NAMES[speed]?.toLowerCase() ?? ""} rating ${ratingText(own)} is provisional (${own.games} rated ${own.games === 1 ? "game" : "games"}): not listed until it settles.`
          : "";
      },
      (error: unknown) =>
        leaders.replaceChildren(h("li", { class: "empty" }, `unavailable: ${describe(error)}`)),
    );
  };
  leaderSpeed.addEventListener("change", () => void showLeaders());
  window.addEventListener(
    SIGNED_IN,
    () => {
      void showLeaders();
      // The account's own games, made in another browser, are now its to open and play.
      render();
    },
    { signal: abort.signal },
  );
  void showLeaders();

  return () => {
    abort.abort();
    seeking?.abort();
  };
}

// ---------------------------------------------------------------- a player's profile

const SPEED_NAMES: Record<number, string> = {
  [Speed.BULLET]: "Bullet",
  [Speed.BLITZ]: "Blitz",
  [Speed.RAPID]: "Rapid",
  [Speed.CLASSICAL]: "Classical",
  [Speed.CORRESPONDENCE]: "Correspondence",
};

/** Whether `name` could be a username (account.proto: 2–20 letters, digits, `_` and `-`): a
 * link can carry any text, and the page shows only what could be a player's name. */
const plausibleUsername = (name: string) => /^[\p{L}\p{M}0-9_-]{2,20}$/u.test(name.normalize("NFC"));

/** Ratings per speed, record and recent games of an account. */
function showProfile(username: string): () => void {
  if (!plausibleUsername(username)) {
    // Not asked for: no account can have that name.
    app.append(
      h(
        "section",
        { class: "card profile" },
        h("a", { href: "#/", "data-testid": "back" }, "← Lobby"),
        h("h2", { "data-testid": "profile-name" }, "No such player"),
      ),
    );
    return () => {};
  }
  let left = false;
  const name = h("h2", { "data-testid": "profile-name" }, username);
  const record = h("p", { "data-testid": "record" }, "…");
  const ratings = h("table", { class: "ratings", "data-testid": "ratings" });
  const provisionalNote = h(
    "p",
    { class: "hint", "data-testid": "provisional-note", hidden: true },
    "? provisional: fewer than 10 rated games at that speed, or not yet certain.",
  );
  const recent = h("ul", { class: "list", "data-testid": "recent-games" });
  const section = h(
    "section",
    { class: "card profile" },
    h("a", { href: "#/", "data-testid": "back" }, "← Lobby"),
    name,
    record,
    h("h3", {}, "Ratings"),
    ratings,
    provisionalNote,
    h("h3", {}, "Recent games"),
    recent,
  );
  app.append(section);

  void accounts.getPlayer({ username }, bearer(undefined)).then(
    (response) => {
      const player = response.player;
      if (left || !player) return;
      name.textContent = player.username;
      record.textContent = `${player.wins} won · ${player.draws} drawn · ${player.losses} lost`;
      ratings.replaceChildren(
        h("tr", {}, h("th", {}, "Speed"), h("th", {}, "Rating"), h("th", {}, "±"), h("th", {}, "Games")),
        ...player.ratings.map((r) =>
          h(
            "tr",
            { "data-speed": SPEED_NAMES[r.speed]?.toLowerCase() ?? String(r.speed) },
            h("td", {}, SPEED_NAMES[r.speed] ?? "?"),
            // As the server says: a provisional rating is shown with a "?".
            h("td", { title: r.provisional ? "provisional" : undefined }, `${r.rating}${r.provisional ? "?" : ""}`),
            h("td", {}, String(r.deviation)),
            h("td", {}, String(r.games)),
          ),
        ),
      );
      // Only an account with no rating at all has no rated games: a provisional one is a rating.
      if (player.ratings.length === 0) ratings.replaceChildren(h("tr", {}, h("td", {}, "no rated games yet")));
      provisionalNote.hidden = !player.ratings.some((r) => r.provisional);
    },
    (error: unknown) => {
      if (left) return;
      if (ConnectError.from(error).code === Code.NotFound) {
        // As for a name no account can have: nothing half-drawn.
        left = true;
        section.replaceChildren(
          h("a", { href: "#/", "data-testid": "back" }, "← Lobby"),
          h("h2", { "data-testid": "profile-name" }, "No such player"),
        );
        return;
      }
      record.textContent = "";
      say(`No profile for ${username}: ${describe(error)}`, "error");
    },
  );

  void accounts.listPlayerGames({ username, pageSize: 10 }, bearer(undefined)).then(
    (response) => {
      if (left) return;
      recent.replaceChildren(
        ...response.games.map((g) =>
          h(
            "li",
            { "data-game": g.id },
            h(
              "span",
              {},
              `${seatName(g, Player.FIRST)} – ${seatName(g, Player.SECOND)} · ${timeControlText(g)}${g.rated ? " · rated" : ""}${g.result ? ` · ${resultText(g)}` : ""}`,
            ),
            button("Watch", "watch", () => openGame(g.id), {
              "aria-label": `Watch ${seatName(g, Player.FIRST)} – ${seatName(g, Player.SECOND)}`,
            }),
          ),
        ),
      );
      if (response.games.length === 0) recent.append(h("li", { class: "empty" }, "none yet"));
    },
    (error: unknown) => {
      if (!left) recent.replaceChildren(h("li", { class: "empty" }, `unavailable: ${describe(error)}`));
    },
  );

  return () => {
    left = true;
  };
}

// ---------------------------------------------------------------- game

/** Where each ring square sits, seen from `bottom`'s seat: top row, bottom row, left, right. */
function layout(bottom: Player) {
  return bottom === Player.SECOND
    ? { top: [5, 4, 3, 2, 1], bottom: [7, 8, 9, 10, 11], left: 6, right: 0 }
    : { top: [11, 10, 9, 8, 7], bottom: [1, 2, 3, 4, 5], left: 0, right: 6 };
}

const SPEEDS: [string, string][] = [
  ["150", "Animation: normal"],
  ["400", "Animation: slow"],
  ["50", "Animation: fast"],
  ["0", "Animation: off"],
];

function showGame(id: string): () => void {
  const abort = new AbortController();
  const mine = store.seat(id);
  const seat: Player = mine?.seat ?? Player.UNSPECIFIED;
  const bottom = seat === Player.SECOND ? Player.SECOND : Player.FIRST;
  const places = layout(bottom);

  let game: Game | undefined;
  let shown: number[] = new Array<number>(12).fill(0);
  let pieces: number[] = new Array<number>(12).fill(0);
  // Scores as shown: they change during a move's animation, before `game` has the new position.
  let score: [number, number] = [0, 0];
  let clocks: Clocks | undefined;
  /** Whether the game this page saw aborted ended at its first move's deadline (undefined: not seen). */
  let abortedLate: boolean | undefined;
  let clocksAt = 0;
  // The server's time of the reading a resumed stream asked for (see `refreshClocks`).
  let freshAt: number | undefined;
  // Whose turn the clocks' deadline is for: a move's clocks come before its animation, while
  // the board (and `game.position`) still shows the mover to move.
  let clocksToMove: Player = Player.UNSPECIFIED;
  let lastMove: number | undefined;
  let selected: number | undefined;
  let animating = false;
  let queue: Promise<void> = Promise.resolve();
  /** Runs `step` after the steps before it; one that fails (a reply this page does not
   * expect) is logged and does not stop the events after it. */
  const enqueue = (step: () => void | Promise<void>) => {
    queue = queue.then(step).catch((error: unknown) => {
      console.error("oanquan: an event could not be shown", error);
    });
  };
  let connected = false;
  // The seat token of a rematch this page offered, kept in the browser until the rematch
  // starts: a reload or a visit to the lobby meanwhile must not lose the seat.
  let pendingRematch = store.pendingRematch(id);
  // The ply of the move this page sent and has not yet seen come back as an event: until then it
  // is not this page's turn, so a quick second click cannot send another move for the same ply
  // (which the server would refuse as stale, and the page would show as an error).
  let inFlight: number | undefined;
  // Whether the status line shows this page's failed move: the next move played clears it.
  let moveError = false;
  // While this page's OfferDraw is on its way: a second click would be refused.
  let offeringDraw = false;

  const squares = new Map<number, HTMLButtonElement>();
  const squareButton = (index: number) => {
    const mandarin = index === 0 || index === 6;
    const b = h("button", {
      type: "button",
      class: mandarin ? "square mandarin" : "square",
      "data-square": String(index),
      "aria-label": squareName(index),
    });
    b.addEventListener("click", () => choose(index));
    b.addEventListener("keydown", (event) => {
      if (selected !== index) return;
      if (event.key === "ArrowLeft") {
        event.preventDefault();
        void play(index, Direction.LEFT);
      } else if (event.key === "ArrowRight") {
        event.preventDefault();
        void play(index, Direction.RIGHT);
      } else if (event.key === "Escape") {
        selected = undefined;
        render();
      }
    });
    squares.set(index, b);
    return b;
  };

  const title = h("h2", { "data-testid": "title" }, "Game");
  const topName = h("div", { class: "player top", "data-testid": "top-player" });
  const bottomName = h("div", { class: "player bottom", "data-testid": "bottom-player" });
  const topClock = h("span", { class: "clock", "data-testid": "top-clock" });
  const bottomClock = h("span", { class: "clock", "data-testid": "bottom-clock" });
  // A real-time game's first moves have their own limit, with no clock running: missing it
  // aborts the game, so the player to move is shown how long is left.
  const topFirstMove = h("span", { class: "first-move", "data-testid": "top-first-move" });
  const bottomFirstMove = h("span", { class: "first-move", "data-testid": "bottom-first-move" });
  const topScore = h("span", { class: "score", "data-testid": "top-score" });
  const bottomScore = h("span", { class: "score", "data-testid": "bottom-score" });
  const turn = h("div", { class: "turn", "data-testid": "turn", role: "status" });
  // Each move not this page's, in words, for a screen reader: the turn line's "Your turn" reads
  // the same after every reply, and an outside probe had to read all twelve squares again to
  // learn what the opponent did.
  const moveSaid = h("p", { class: "sr-only", "aria-live": "polite", "data-testid": "move-said" });
  const over = h("div", { class: "over", "data-testid": "game-over", hidden: true });
  const connection = h("div", { class: "connection", "data-testid": "connection" });
  const moves = h("div", { class: "moves", "data-testid": "move-count" });
  const directions = h(
    "div",
    { class: "directions", hidden: true },
    directionButton("left", "◀", () => selected !== undefined && void play(selected, leftDirection())),
    directionButton("right", "▶", () => selected !== undefined && void play(selected, rightDirection())),
  );
  const speed = select("speed", SPEEDS);
  speed.setAttribute("aria-label", "Animation speed");
  speed.value = localStorage.getItem("oanquan.speed") ?? "150";
  speed.addEventListener("change", () => localStorage.setItem("oanquan.speed", speed.value));
  // Hidden until the first render knows the game: shown before the snapshot came, they offered
  // a resignation to a spectator and a draw to the computer.
  const resign = button("Resign", "resign", () => void act("resign"), { hidden: "" });
  // Before the first move: a game nobody joins, or one begun by mistake, can be called off.
  const abortGame = button("Abort", "abort", () => void act("abort"), { hidden: "" });
  const draw = button("Offer draw", "draw", () => void act("draw"), { hidden: "" });
  const declineDraw = button("Decline draw", "decline-draw", () => void act("declineDraw"), { hidden: "" });
  const rematch = button("Rematch", "rematch", () => void act("rematch"), { hidden: "" });
  // A shared link to a game waiting for a second player: whoever opens it can take the seat,
  // under the name in the account bar (or the account signed in), as from the lobby.
  const join = button("Join this game", "join-game", () => void joinHere(), { hidden: "" });
  const hint = h(
    "p",
    { class: "hint", "data-testid": "hint" },
    mine ? PICK_HINT : "Watching.",
  );
  const nextGame = h("a", { "data-testid": "next-game", hidden: true }, "Go to the rematch");
  // A waiting game's link, to send to a friend: whoever opens it may take the seat. Shown as
  // text too, selectable by hand where the page may not write the clipboard (plain http
  // from another machine has no clipboard API).
  const link = `${location.origin}${location.pathname}#/game/${id}`;
  const linkText = h("input", {
    class: "invite-link",
    "data-testid": "invite-link",
    readonly: "",
    value: link,
    "aria-label": "This game's link",
  }) as HTMLInputElement;
  linkText.addEventListener("focus", () => linkText.select());
  // What copying did, beside the button too: on a phone the status line is scrolled away
  // above it (an outside probe's 320-px screen).
  const copyNote = h("span", { class: "hint", "data-testid": "copy-note" });
  const copyResult = (text: string) => {
    say(text);
    copyNote.textContent = text;
  };
  const copyLink = button("Copy link", "copy-link", () => {
    linkText.select();
    const copied = navigator.clipboard?.writeText(link);
    if (!copied) {
      copyResult("This browser does not let the page copy: the link is selected, copy it from there.");
      return;
    }
    copied.then(
      () => copyResult("Link copied: whoever opens it can join this game."),
      () => copyResult("The browser refused to copy: the link is selected, copy it from there."),
    );
  });
  const invite = h("div", { class: "actions invite", "data-testid": "invite", hidden: true }, linkText, copyLink, copyNote);

  // Seen from a seat, "right" on screen is the player's right; the bottom row is always the
  // viewer's, so the screen's left and right are the protocol's for the bottom player.
  const leftDirection = () => Direction.LEFT;
  const rightDirection = () => Direction.RIGHT;

  const board = h(
    "div",
    { class: "board", "data-testid": "board" },
    h("div", { class: "side left" }, squareButton(places.left)),
    h("div", { class: "row top" }, ...places.top.map(squareButton)),
    h("div", { class: "row bottom" }, ...places.bottom.map(squareButton)),
    h("div", { class: "side right" }, squareButton(places.right)),
  );

  app.append(
    h(
      "section",
      { class: "game" },
      h("div", { class: "game-head" }, title, connection),
      h("div", { class: "bar" }, topName, topFirstMove, topScore, topClock),
      board,
      h("div", { class: "bar" }, bottomName, bottomFirstMove, bottomScore, bottomClock),
      directions,
      turn,
      over,
      nextGame,
      h("div", { class: "actions" }, join, resign, abortGame, draw, declineDraw, rematch, speed, moves),
      hint,
      invite,
      howToPlay(),
      moveSaid,
    ),
  );

  const myTurn = () =>
    !!game &&
    // Not while the stream is away: the move could not be sent, and the board may be old.
    connected &&
    game.status === GameStatus.ACTIVE &&
    seat !== Player.UNSPECIFIED &&
    game.position?.toMove === seat &&
    game.position?.ply !== inFlight;
  // A spectator owns no square (a screen reader must not call any "your square").
  const ownSquare = (index: number) =>
    seat === Player.FIRST ? index >= 1 && index <= 5 : seat === Player.SECOND && index >= 7 && index <= 11;
  // A square as its player counts it, 1-5 from their own left (as moves are given in the CLI
  // and the README), with whose row it is; the ring's index (0-11) is the protocol's, which an
  // outside probe heard read out as "your square 8". The mandarin squares, by the side of the
  // screen they are on.
  function squareName(index: number): string {
    if (index === 0 || index === 6) {
      return `mandarin square on the ${index === places.left ? "left" : "right"}`;
    }
    const owner = index <= 5 ? Player.FIRST : Player.SECOND;
    const number = owner === Player.FIRST ? index : index - 6;
    if (seat === Player.UNSPECIFIED) {
      return `${owner === Player.FIRST ? "first" : "second"} player's square ${number}`;
    }
    return `${owner === seat ? "your" : "opponent's"} square ${number}`;
  }

  async function joinHere() {
    join.disabled = true;
    // The page is this game's already: it is drawn again, now from the seat.
    if (await takeSeat(id)) route();
    else join.disabled = false;
  }

  function choose(index: number) {
    if (!myTurn() || animating || !ownSquare(index) || shown[index] === 0) return;
    selected = selected === index ? undefined : index;
    render();
  }

  async function play(square: number, direction: Direction) {
    if (!game || !mine || !myTurn()) return;
    const ply = game.position?.ply;
    selected = undefined;
    inFlight = ply;
    render();
    try {
      await games.playMove({ gameId: id, move: { square, direction }, expectedPly: ply }, bearer(mine.token));
    } catch (error) {
      if (inFlight === ply) inFlight = undefined;
      render();
      const e = ConnectError.from(error);
      // A refusal is the server's answer; no answer at all is the connection's.
      const refused = e.code !== Code.Unavailable && e.code !== Code.Unknown && e.code !== Code.DeadlineExceeded;
      say(refused ? `Move refused: ${describe(error)}` : `The move was not sent: ${describe(error)}${NOT_SENT_ENDING}`, "error");
      moveError = true;
    }
  }

  async function act(what: "resign" | "abort" | "draw" | "declineDraw" | "rematch") {
    if (!mine) return;
    try {
      const auth = bearer(mine.token);
      if (what === "abort") {
        if (!confirm("Abort this game? It ends with no result.")) return;
        await games.abortGame({ gameId: id }, auth);
      } else if (what === "resign") {
        if (!confirm("Resign this game?")) return;
        await games.resign({ gameId: id }, auth);
      } else if (what === "draw") {
        offeringDraw = true;
        render();
        try {
          const response = await games.offerDraw({ gameId: id }, auth);
          const after = response.game;
          // Shown at once, not only when the event comes; in turn with the events, and only if
          // no move came between (the opponent's move ends the offer).
          if (!response.accepted && after) {
            enqueue(() => {
              if (game && game.moveCount === after.moveCount) game.drawOffer = after.drawOffer;
            });
          }
        } finally {
          offeringDraw = false;
          enqueue(render);
        }
      } else if (what === "declineDraw") await games.declineDraw({ gameId: id }, auth);
      else {
        const response = await games.offerRematch({ gameId: id }, auth);
        if (response.rematch) {
          // The rematch's seat is the account's if this one was.
          store.setSeat(response.rematch.id, {
            token: response.playerToken,
            seat: response.seat,
            account: store.seat(id)?.account ?? false,
          });
          openGame(response.rematch.id);
        } else {
          pendingRematch = { token: response.playerToken, seat: response.seat, account: store.seat(id)?.account ?? false };
          store.setPendingRematch(id, pendingRematch);
          say("Rematch offered");
          render();
        }
      }
    } catch (error) {
      say(describe(error), "error");
    }
  }

  function clockMs(player: Player): number | undefined {
    if (!clocks) return undefined;
    const base = player === Player.FIRST ? clocks.firstRemaining : clocks.secondRemaining;
    if (!base) return undefined;
    let ms = durationMs(base);
    if (clocks.running === player && game?.status === GameStatus.ACTIVE) ms -= performance.now() - clocksAt;
    return ms;
  }

  /** Time left for the player to move's first move, while a real-time game waits for it. */
  function firstMoveMs(): number | undefined {
    // No clock runs during the first moves (game.proto, Clocks): the deadline is the limit.
    if (!clocks?.deadline || !clocks.measuredAt || clocks.running !== Player.UNSPECIFIED) return undefined;
    if (game?.status !== GameStatus.ACTIVE || game.timeControl?.kind.case !== "realTime") return undefined;
    // Both times are the server's; the time since is this browser's (its clock may be off).
    return timestampMs(clocks.deadline) - timestampMs(clocks.measuredAt) - (performance.now() - clocksAt);
  }

  function renderClocks() {
    const top = bottom === Player.FIRST ? Player.SECOND : Player.FIRST;
    for (const [player, element] of [
      [top, topClock],
      [bottom, bottomClock],
    ] as const) {
      const ms = clockMs(player);
      element.textContent = ms === undefined ? "" : formatMs(ms);
      element.classList.toggle("running", clocks?.running === player && game?.status === GameStatus.ACTIVE);
      element.classList.toggle("low", ms !== undefined && ms < 10_000);
      // While the stream is away the server's clock is not seen: a network break runs it on, a
      // server restart gives the time back. The count goes on, marked as a guess.
      const stale = !connected && game?.status === GameStatus.ACTIVE && ms !== undefined;
      element.classList.toggle("stale", stale);
      element.title = stale ? "estimated: reconnecting to the server" : "";
    }
    const firstMove = firstMoveMs();
    for (const [player, element] of [
      [top, topFirstMove],
      [bottom, bottomFirstMove],
    ] as const) {
      const shown = firstMove !== undefined && clocksToMove === player;
      element.textContent = shown ? `First move within ${formatMs(firstMove)}` : "";
      element.classList.toggle("low", shown && firstMove < 10_000);
    }
  }

  /** Focus left on a square that can no longer be played (the one just played, by keyboard)
   * goes to the first playable square when the turn comes back: from a square out of the Tab
   * order, an outside probe needed up to 8 Tabs to reach one. Focus elsewhere is left alone. */
  function moveFocusToPlay() {
    const focused = document.activeElement;
    if (!(focused instanceof HTMLElement) || !board.contains(focused) || focused.classList.contains("playable")) return;
    [...squares.values()].find((b) => b.classList.contains("playable"))?.focus();
  }

  function render() {
    for (const [index, b] of squares) {
      const stones = shown[index];
      const piece = pieces[index] > 0;
      const dots = h("span", { class: "stones", "aria-hidden": "true" });
      for (let i = 0; i < Math.min(stones, 24); i++) dots.append(h("i"));
      b.replaceChildren(h("span", { class: "count", "data-testid": `count-${index}` }, String(stones)), dots);
      // What a screen reader says of the square: whose it is, its count, and whether it can be
      // played.
      b.setAttribute(
        "aria-label",
        `${squareName(index)}, ${stones} ${stones === 1 ? "stone" : "stones"}${piece ? " and the mandarin piece" : ""}`,
      );
      if (piece) b.append(h("span", { class: "piece", title: "mandarin piece" }, "Q"));
      const playable = myTurn() && !animating && ownSquare(index) && stones > 0;
      b.classList.toggle("playable", playable);
      b.classList.toggle("selected", selected === index);
      b.classList.toggle("last", lastMove === index);
      // Only a square that can be played now is a Tab stop (tabindex -1 takes the others out of
      // the Tab order); aria-disabled, not `disabled`, says it cannot be played while it stays an
      // ordinary button whose label (its count) screen readers read with the board.
      if (playable) {
        b.removeAttribute("tabindex");
        b.removeAttribute("aria-disabled");
        // A toggle: a screen reader says "pressed" on the square picked, as the ring shows it.
        b.setAttribute("aria-pressed", String(selected === index));
      } else {
        b.tabIndex = -1;
        b.setAttribute("aria-disabled", "true");
        b.removeAttribute("aria-pressed");
      }
    }
    directions.hidden = selected === undefined;
    for (const d of directions.querySelectorAll<HTMLButtonElement>("button")) {
      d.setAttribute(
        "aria-label",
        selected === undefined ? `Sow to the ${d.dataset.side}` : `Sow ${squareName(selected)} to the ${d.dataset.side}`,
      );
    }
    if (selected !== undefined) squares.get(selected)?.focus();
    else moveFocusToPlay();
    if (!game) return;
    const top = bottom === Player.FIRST ? Player.SECOND : Player.FIRST;
    title.textContent = `${seatName(game, Player.FIRST)} – ${seatName(game, Player.SECOND)} · ${game.preset} · ${timeControlText(game)}${game.rated ? " · rated" : ""}`;
    topName.replaceChildren(...seatLabel(game, top), seat === top ? " (you)" : "");
    bottomName.replaceChildren(...seatLabel(game, bottom), seat === bottom ? " (you)" : "");
    topScore.textContent = String(top === Player.FIRST ? score[0] : score[1]);
    bottomScore.textContent = String(bottom === Player.FIRST ? score[0] : score[1]);
    moves.textContent = `moves: ${game.moveCount}`;
    const active = game.status === GameStatus.ACTIVE;
    // The player's own turn reads "Your turn" also while the stream is away (no square is
    // playable then, and the connection line says "reconnecting…").
    const ownTurn = active && seat !== Player.UNSPECIFIED && game.position?.toMove === seat;
    if (game.status === GameStatus.WAITING_FOR_PLAYERS) turn.textContent = "Waiting for an opponent…";
    else if (active) {
      if (ownTurn && game.position?.ply === inFlight) turn.textContent = "Move sent…";
      else if (ownTurn) turn.textContent = "Your turn";
      // The name after words of the page's own: a player named "Your turn" read as the page
      // saying so on the opponent's screen (an outside probe's).
      else turn.textContent = `Waiting for ${seatName(game, game.position?.toMove ?? Player.FIRST)} to move`;
    } else turn.textContent = "";
    turn.classList.toggle("mine", myTurn());
    join.hidden =
      !!mine ||
      game.status !== GameStatus.WAITING_FOR_PLAYERS ||
      (!!game.firstSeat?.occupied && !!game.secondSeat?.occupied);
    const finished = game.status === GameStatus.FINISHED || game.status === GameStatus.ABORTED;
    over.hidden = !finished;
    hint.hidden = finished;
    // A game waiting for its second player has no move to pick yet.
    // On the opponent's turn there is nothing to pick: the turn line says whose move it is.
    if (mine) {
      hint.textContent =
        game.status === GameStatus.WAITING_FOR_PLAYERS
          ? "Waiting for an opponent to join."
          : myTurn()
            ? PICK_HINT
            : "";
    }
    invite.hidden = !mine || game.status !== GameStatus.WAITING_FOR_PLAYERS;
    over.textContent = finished ? `Game over: ${resultText(game, abortedLate) || "aborted"}` : "";
    const beforeFirstMove =
      (game.status === GameStatus.WAITING_FOR_PLAYERS || active) && (game.moveCount ?? 0) === 0;
    abortGame.hidden = !mine || !beforeFirstMove;
    resign.hidden = !mine || !active;
    // The computer does not take draws (the server refuses the offer).
    const opponent = seat === Player.FIRST ? game.secondSeat : game.firstSeat;
    draw.hidden = !mine || !active || opponent?.kind === PlayerKind.COMPUTER;
    // Like a rematch offer, one's own draw offer shows until it is answered or lapses.
    const ownOffer = seat !== Player.UNSPECIFIED && game.drawOffer === seat;
    draw.textContent = ownOffer
      ? "Draw offered"
      : game.drawOffer !== Player.UNSPECIFIED
        ? "Accept draw"
        : "Offer draw";
    draw.disabled = ownOffer || offeringDraw;
    declineDraw.hidden = !mine || !active || game.drawOffer === Player.UNSPECIFIED || game.drawOffer === seat;
    rematch.hidden = !mine || game.status !== GameStatus.FINISHED || !!game.rematch;
    const offeredHere = !!pendingRematch && game.rematchOffer === seat;
    rematch.textContent = offeredHere
      ? "Rematch offered"
      : game.rematchOffer !== Player.UNSPECIFIED && game.rematchOffer !== seat
        ? "Accept rematch"
        : "Rematch";
    rematch.disabled = offeredHere;
    if (game.rematch) {
      nextGame.hidden = false;
      nextGame.setAttribute("href", `#/game/${game.rematch}`);
    }
    renderClocks();
  }

  function setPosition(g: Pick<Game, "position">) {
    shown = [...(g.position?.squares ?? shown)];
    pieces = [...(g.position?.pieces ?? pieces)];
    const scores = g.position?.scores;
    if (scores) score = [scores.first, scores.second];
  }

  /**
   * Plays a move's trace on the board, one step per `speed` delay: the picked square empties,
   * each sown square gains a stone, a capture empties its square into the mover's score, a
   * refill puts a stone on each of a side's squares. Whatever the steps showed, the board ends
   * on the server's position after the move, so a slip here can never leave a wrong board.
   */
  /**
   * The delay before a move's next step, `steps` of them left: the chosen speed, except while
   * the viewer's own clock runs (this page's squares wait for the animation's end). Then all
   * that is shown on that clock before the viewer moves (the rest of their own move, and the
   * reply) takes at most a twentieth of their time beyond the last 30 seconds: none at all
   * below it, or when a step would be too short to see. Asked at every step: the viewer's own
   * move may still be showing when the computer's reply starts their clock. In 15-second
   * games outside probes lost 2 to 4 s a move watching moves, and with a twentieth of each
   * move still 11 of 15 seconds in a game.
   */
  function stepDelay(steps: number, budget: { ends?: number }): number {
    const chosen = Number(speed.value);
    if (chosen <= 0 || seat === Player.UNSPECIFIED || clocksToMove !== seat) return chosen;
    const left = clocks?.running === seat ? clockMs(seat) : firstMoveMs();
    if (left === undefined) return chosen;
    // One share for the whole turn, from the first step that counts it.
    budget.ends ??= performance.now() + Math.max(0, left - ANIMATION_RESERVE_MS) / 20;
    const allowed = Math.floor((budget.ends - performance.now()) / Math.max(1, steps));
    return allowed < 10 ? 0 : Math.min(chosen, allowed);
  }

  /** The budget of the viewer's turn that `record` comes before: their own move and the reply
   * to it share one (see `stepDelay`), keyed by the number of the viewer's next move. */
  let turnBudget: { before: number; ends?: number } = { before: 0 };
  function budgetFor(record: MoveRecord): { ends?: number } {
    const before = record.player === seat ? record.number + 2 : record.number + 1;
    if (turnBudget.before !== before) turnBudget = { before };
    return turnBudget;
  }

  async function animate(record: MoveRecord) {
    lastMove = record.move?.square;
    const budget = budgetFor(record);
    if (stepDelay(record.steps.length, budget) > 0 && record.steps.length > 0) {
      animating = true;
      try {
        for (const [index, step] of record.steps.entries()) {
          if (abort.signal.aborted) return;
          const delay = stepDelay(record.steps.length - index, budget);
          // Too short to see now: the rest goes at once, to the server's position below.
          if (delay <= 0) break;
          const lit = applyStep(step);
          board.dataset.step = String(index);
          render();
          if (lit.squares.length === 0) continue;
          const elements = lit.squares.map((square) => squares.get(square));
          for (const element of elements) element?.classList.add(lit.kind);
          await sleep(delay);
          for (const element of elements) element?.classList.remove(lit.kind);
        }
      } finally {
        animating = false;
        delete board.dataset.step;
      }
    }
    if (record.position) setPosition(record);
  }

  /** Shows one step on `shown`, `pieces` and `score`; says which squares to light and how. */
  function applyStep(step: Step): { squares: number[]; kind: string } {
    const kind = step.kind;
    switch (kind.case) {
      case "pickUp":
        if (kind.value.square === undefined || kind.value.square >= 12) break;
        shown[kind.value.square] = 0;
        return { squares: [kind.value.square], kind: "pick" };
      case "sow":
        if (kind.value.square === undefined || kind.value.square >= 12) break;
        shown[kind.value.square] += 1;
        return { squares: [kind.value.square], kind: "sow" };
      case "capture": {
        if (kind.value.square === undefined || kind.value.square >= 12) break;
        shown[kind.value.square] = 0;
        pieces[kind.value.square] = 0;
        const worth = kind.value.stones + kind.value.pieces * (game?.ruleSet?.quanValue ?? 0);
        if (kind.value.player === Player.FIRST) score[0] += worth;
        else if (kind.value.player === Player.SECOND) score[1] += worth;
        return { squares: [kind.value.square], kind: "capture" };
      }
      case "refill": {
        // Five stones borrowed from the player's captured count onto their five squares.
        const row = kind.value.player === Player.FIRST ? [1, 2, 3, 4, 5] : [7, 8, 9, 10, 11];
        for (const square of row) shown[square] += 1;
        if (kind.value.player === Player.FIRST) score[0] -= row.length;
        else if (kind.value.player === Player.SECOND) score[1] -= row.length;
        return { squares: row, kind: "sow" };
      }
      case "stopAtMandarin":
      case "captureProtected":
      case "captureImmature":
        if (kind.value.square === undefined || kind.value.square >= 12) break;
        return { squares: [kind.value.square], kind: "stop" };
      default:
        break;
    }
    return { squares: [], kind: "" };
  }

  function setClocks(next: Clocks | undefined, toMove: Player | undefined) {
    if (!next) return;
    // A reading older than the fresh one a resumed stream asked for (a missed event replayed
    // after it) would give the time since back: both are the server's times. The first newer
    // reading ends the check, so that a later move is never held to another node's clock.
    if (freshAt !== undefined && next.measuredAt) {
      if (timestampMs(next.measuredAt) < freshAt) return;
      freshAt = undefined;
    }
    clocks = next;
    clocksAt = performance.now();
    clocksToMove = toMove ?? Player.UNSPECIFIED;
  }

  /** Withdraws an action's error that blamed the connection, and says again an offer it hid. */
  function withdrawTroubleAndSayOffer() {
    if (withdrawConnectionTrouble() && game) sayStandingOffer(game);
  }

  /** An opponent's offer that stands when the page opens the game (a reload) is said in words,
   * as when it was made: an outside probe's reload left only the buttons. */
  function sayStandingOffer(shown: Game) {
    if (seat === Player.UNSPECIFIED) return;
    const opponent = seat === Player.FIRST ? Player.SECOND : Player.FIRST;
    if (shown.status === GameStatus.ACTIVE && shown.drawOffer === opponent) {
      say(`${seatName(shown, opponent)}${OFFERS_DRAW}`);
    } else if (shown.rematchOffer === opponent && !shown.rematch) {
      say(`${seatName(shown, opponent)}${OFFERS_REMATCH}`);
    }
  }

  /** Reads the game's clocks as they are now, for a page whose stream replayed old readings. */
  async function refreshClocks() {
    try {
      const now = (await games.getGame({ gameId: game?.id ?? id }, bearer(undefined))).game;
      if (now?.clocks && now.id === game?.id) {
        freshAt = undefined;
        setClocks(now.clocks, now.position?.toMove);
        freshAt = now.clocks.measuredAt ? timestampMs(now.clocks.measuredAt) : undefined;
        render();
      }
    } catch {
      // The next move's reading comes with it.
    }
  }

  function handle(event: GameEvent) {
    const kind = event.kind;
    switch (kind.case) {
      case "snapshot":
        enqueue(() => {
          game = kind.value.game;
          selected = undefined;
          if (game) {
            setPosition(game);
            setClocks(game.clocks, game.position?.toMove);
            // Accepted while this page was away: the seat is this browser's all the same.
            if (game.rematch && pendingRematch) store.setSeat(game.rematch, pendingRematch);
            sayStandingOffer(game);
            // Signed in as a player of this game whose seat this view does not hold (signed in
            // again, or another tab took the seat back while this view was being drawn).
            if (!mine && store.apiKey()) void adoptAccountSeat();
          }
          render();
        });
        break;
      case "gameStarted":
        enqueue(() => {
          game = kind.value.game;
          if (game) {
            setPosition(game);
            setClocks(game.clocks, game.position?.toMove);
          }
          render();
        });
        break;
      case "playerJoined":
        enqueue(async () => {
          try {
            game = (await games.getGame({ gameId: id }, bearer(undefined))).game ?? game;
          } catch {
            // The next event or snapshot brings it.
          }
          render();
        });
        break;
      case "movePlayed":
        // The clocks as the server reads them now, not after the move's animation: the next
        // player's clock runs from the event, and showing it late showed more time than left.
        // Turns alternate: the clocks after a move are the other player's.
        setClocks(kind.value.clocks, kind.value.record?.player === Player.FIRST ? Player.SECOND : Player.FIRST);
        enqueue(async () => {
          const record = kind.value.record;
          if (!record || !game) return;
          await animate(record);
          if (record.position) game.position = record.position;
          game.moveCount = record.number;
          // A square picked on the board before this move was picked on another board (a
          // second tab of the seat moved): playing it would send a move no one chose.
          selected = undefined;
          if (record.player !== seat) moveSaid.textContent = moveSentence(game, record, seat);
          // A draw offer stands until the offerer's opponent moves (game.proto, DrawAction).
          if (record.player !== game.drawOffer) {
            game.drawOffer = Player.UNSPECIFIED;
            withdrawNotice(OFFERS_DRAW);
          }
          if (moveError) {
            moveError = false;
            say("");
          }
          render();
        });
        break;
      case "turnStarted":
        setClocks(kind.value.clocks, kind.value.player);
        enqueue(async () => {
          if (kind.value.refill && game) {
            try {
              game = (await games.getGame({ gameId: id }, bearer(undefined))).game ?? game;
              setPosition(game);
            } catch {
              // Shown by the next move.
            }
          }
          render();
        });
        break;
      case "gameOver":
        enqueue(() => {
          if (!game) return;
          game.result = kind.value.result;
          game.status = kind.value.result?.endReason === EndReason.ABORTED ? GameStatus.ABORTED : GameStatus.FINISHED;
          const final = kind.value.result?.scores;
          if (final) {
            if (game.position) game.position.scores = final;
            score = [final.first, final.second];
          }
          // Aborted at the first move's deadline (the server ends such a game at the deadline
          // itself), or by a player before it.
          const deadline = clocks?.running === Player.UNSPECIFIED ? clocks.deadline : undefined;
          const endedAt = event.time ?? kind.value.clocks?.measuredAt;
          if (kind.value.result?.endReason === EndReason.ABORTED && deadline && endedAt) {
            abortedLate = timestampMs(endedAt) >= timestampMs(deadline);
          }
          setClocks(kind.value.clocks, Player.UNSPECIFIED);
          // An offer the game's end leaves unanswered no longer stands (an outside probe saw
          // "offers a draw" beside the result).
          game.drawOffer = Player.UNSPECIFIED;
          withdrawNotice(OFFERS_DRAW);
          // A rated result changed the account's rating: the account bar says the new one (an
          // outside probe's stayed at the old one until a reload).
          if (store.apiKey() && (kind.value.result?.firstRating || kind.value.result?.secondRating)) void showMe();
          // Said to a screen reader too, in place of the last move's sentence (whose "Your
          // turn" no longer holds): an outside probe's blind player never heard the result.
          moveSaid.textContent = `Game over: ${resultText(game, abortedLate) || "aborted"}`;
          render();
        });
        break;
      case "draw":
        enqueue(() => {
          if (!game) return;
          game.drawOffer = kind.value.action === GameEvent_DrawAction.OFFERED ? kind.value.by : Player.UNSPECIFIED;
          if (kind.value.action === GameEvent_DrawAction.DECLINED && seat !== Player.UNSPECIFIED && kind.value.by !== seat) {
            say("Your draw offer was declined");
          } else if (kind.value.action === GameEvent_DrawAction.OFFERED && seat !== Player.UNSPECIFIED && kind.value.by !== seat) {
            say(`${seatName(game, kind.value.by)}${OFFERS_DRAW}`);
          } else withdrawNotice(OFFERS_DRAW);
          render();
        });
        break;
      case "rematch":
        enqueue(() => {
          if (!game) return;
          if (kind.value.action === GameEvent_RematchAction.OFFERED) {
            game.rematchOffer = kind.value.by;
            if (seat !== Player.UNSPECIFIED && kind.value.by !== seat) say(`${seatName(game, kind.value.by)}${OFFERS_REMATCH}`);
          } else if (kind.value.action === GameEvent_RematchAction.STARTED) {
            game.rematch = kind.value.gameId;
            if (pendingRematch) {
              store.setSeat(kind.value.gameId, pendingRematch);
              openGame(kind.value.gameId);
            }
          } else game.rematchOffer = Player.UNSPECIFIED;
          if (kind.value.action !== GameEvent_RematchAction.OFFERED) withdrawNotice(OFFERS_REMATCH);
          render();
        });
        break;
    }
  }

  // Signed in as an account seated here whose seat this browser forgot (signed out meanwhile):
  // its key plays the seat, as it stands in for the seat token (account.proto). An outside
  // probe signed out and in again mid-game and was left a spectator of its own game.
  window.addEventListener(SIGNED_IN, () => void adoptAccountSeat(), { signal: abort.signal });
  async function adoptAccountSeat() {
    const key = store.apiKey();
    const me = await myProfile;
    if (!key || !me || !game || store.apiKey() !== key) return;
    // Another tab took the seat back first: this view, a spectator's, follows it.
    if (store.seat(id)) {
      if (!mine) route();
      return;
    }
    for (const player of [Player.FIRST, Player.SECOND]) {
      const taken = player === Player.FIRST ? game.firstSeat : game.secondSeat;
      if (taken?.occupied && taken.kind !== PlayerKind.COMPUTER && taken.account?.username === me.username) {
        store.setSeat(id, { token: key, seat: player, account: true });
        route();
        return;
      }
    }
  }

  // The browser back online: a move that could not be sent can be sent again (its stream may
  // never have noticed the break, so `showConnection` would not say so).
  window.addEventListener(
    "online",
    () => {
      withdrawNotice(NOT_SENT_ENDING);
      withdrawTroubleAndSayOffer();
    },
    { signal: abort.signal },
  );

  function showConnection() {
    connection.textContent = connected ? "" : "reconnecting…";
    connection.classList.toggle("bad", !connected);
    // Back, a move that could not be sent can be sent again: the error no longer stands (an
    // outside probe saw it beside "Your turn" long after).
    if (connected) {
      withdrawNotice(NOT_SENT_ENDING);
      withdrawTroubleAndSayOffer();
    }
    // Squares are playable only while connected.
    render();
  }

  /** Follows the game's events; after a break, resumes after the last one seen. */
  async function follow() {
    let after: bigint | undefined;
    let delay = 250;
    // Over, the game's stream goes on while a rematch can be offered, and a break then is
    // resumed like any other (a restart must not hide the opponent's offer); it ends, without
    // an error, once nothing more can happen.
    let ended = false;
    // Connected once the server answers: its response headers (a resumed stream may send no
    // event for a while), or any message.
    const back = () => {
      if (!connected) {
        connected = true;
        showConnection();
      }
    };
    while (!abort.signal.aborted) {
      const dog = watchdog(abort.signal);
      let resumed = (after ?? 0n) > 0n;
      try {
        const stream = games.watchGame(
          { gameId: id, afterSequence: after, followRematch: true },
          {
            signal: dog.signal,
            headers: mine ? { authorization: `Bearer ${mine.token}` } : {},
            onHeader: (headers) => {
              dog.alive();
              if (opensStream(headers)) back();
            },
          },
        );
        for await (const response of stream) {
          dog.alive();
          const event = response.event;
          if (!event) continue;
          // Only a message shows the stream works: a server that answers and then fails at once
          // is retried with a growing delay.
          delay = 250;
          back();
          if (event.kind.case !== "heartbeat") after = event.sequence;
          if (event.kind.case === "gameOver") ended = true;
          // A resumed stream first replays what was missed, each event with the clocks as they
          // were then, and the page counts them down from when they arrive: a move missed a
          // minute ago showed the player a minute more than they had (an outside probe's). The
          // game's clocks as they are now follow the replayed events.
          if (resumed && event.kind.case !== "heartbeat" && event.kind.case !== "snapshot") {
            resumed = false;
            enqueue(refreshClocks);
          }
          if (event.kind.case === "snapshot") {
            const s = event.kind.value.game?.status;
            if (s === GameStatus.FINISHED || s === GameStatus.ABORTED) ended = true;
          }
          handle(event);
        }
        if (ended) break;
      } catch (error) {
        if (abort.signal.aborted) return;
        const code = ConnectError.from(error).code;
        if (mine && (code === Code.Unauthenticated || code === Code.PermissionDenied)) {
          // A seat token the server refuses (another server's, or damaged) would be refused
          // for ever: forget it and watch the game instead.
          store.removeSeat(id);
          route();
          say("This browser's seat in the game was refused; watching it instead.", "error");
          return;
        }
        if (code === Code.DataLoss) {
          // A damaged game stays damaged until someone restores it: said once, not retried
          // behind "reconnecting…" for ever.
          say(describe(error), "error");
          connection.textContent = "this game's stored data is damaged";
          connection.classList.add("bad");
          return;
        }
        if (code === Code.NotFound || code === Code.InvalidArgument) {
          // Retrying cannot make a game appear; and an empty board would look like one.
          say(describe(error), "error");
          if (!game) {
            app.replaceChildren(
              h(
                "section",
                { class: "card" },
                h("a", { href: "#/", "data-testid": "back" }, "← Lobby"),
                h("h2", { "data-testid": "no-game" }, "No such game"),
                connection,
              ),
            );
          }
          connection.textContent = "no such game";
          connection.classList.add("bad");
          return;
        }
        // A stream the page dropped as silent was refused by nobody: "reconnecting…" says it all.
        if (!dog.silent() && (!after || code === Code.ResourceExhausted)) say(describe(error), "error");
      } finally {
        dog.stop();
      }
      connected = false;
      showConnection();
      await sleep(delay);
      delay = Math.min(delay * 2, 2000);
    }
  }

  const ticker = setInterval(renderClocks, 100);
  showConnection();
  render();
  void follow();
  return () => {
    abort.abort();
    clearInterval(ticker);
  };
}

// ---------------------------------------------------------------- start

void showMe();
route();
// For the browser tests and people who look: when the page first showed something useful.
(window as unknown as { oanquanRendered?: number }).oanquanRendered = performance.now();
