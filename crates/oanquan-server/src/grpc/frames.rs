//! A budget for the HTTP/2 frames a client sends that ask nothing of the application.
//!
//! h2 answers every PING and every SETTINGS frame, and reads PRIORITY frames, empty DATA frames,
//! WINDOW_UPDATE and RST_STREAM frames and frames of unknown types at little more than the
//! cost of reading them: none of them passes the rate limiter, which
//! sees requests, so a client sending them in a loop costs the server CPU for nothing. Each
//! HTTP/2 connection therefore has a token bucket of [`BURST`] such frames, refilled at
//! [`PER_SECOND`] and by one token for every [`BYTES_PER_TOKEN`] bytes the server writes; once
//! it is empty the connection is closed. The writes are there for clients that probe the
//! bandwidth-delay product (gRPC's C core, Go and Java do by default): they ping once per round
//! trip while data flows, which on a fast network can be thousands of pings a second, always
//! behind data the server sent. Keepalive pings every few seconds and a SETTINGS frame now and
//! then are far below the rate, and so are the connection's WINDOW_UPDATEs of a client that
//! reads (one per window's worth of data the server wrote), and a client's cancelled calls. A
//! stream's WINDOW_UPDATE and RST_STREAM are counted too: an outside probe sent millions of
//! them on one connection (to a closed stream, or overflowing a stream's window so that the
//! server reset it, "MadeYouReset"), at half a core, never closed. Frames that carry requests
//! (HEADERS, DATA with bytes, GOAWAY, CONTINUATION) are not counted: h2 and the rate limiter
//! have their own limits for those.

use std::time::Instant;

/// Idle frames one connection may send at once.
pub const BURST: f64 = 10_000.0;

/// Idle frames per second one connection may send on average.
pub const PER_SECOND: f64 = 1_000.0;

/// Bytes written to the client that earn it one more idle frame (a pong is 17 bytes, so a ping
/// flood does not pay for itself).
pub const BYTES_PER_TOKEN: f64 = 64.0;

/// The client's connection preface (RFC 9113, section 3.4), which the framing starts after.
const PREFACE_LEN: usize = 24;
const HEADER: usize = 9;

const DATA: u8 = 0;
const PRIORITY: u8 = 2;
const SETTINGS: u8 = 4;
const RST_STREAM: u8 = 3;
const PING: u8 = 6;
const WINDOW_UPDATE: u8 = 8;
/// The highest frame type RFC 9113 defines (CONTINUATION); above it, h2 ignores the frame.
const LAST_KNOWN: u8 = 9;
const END_STREAM: u8 = 0x1;

/// Follows the frames of one HTTP/2 connection as its bytes are read.
#[derive(Debug)]
pub struct FrameBudget {
    /// Preface bytes still to skip.
    preface_left: usize,
    header: [u8; HEADER],
    header_len: usize,
    /// Payload bytes of the current frame still to skip.
    payload_left: usize,
    tokens: f64,
    updated: Instant,
}

impl FrameBudget {
    /// A budget for a connection whose bytes start with the client preface.
    #[must_use]
    pub fn new(now: Instant) -> FrameBudget {
        FrameBudget {
            preface_left: PREFACE_LEN,
            header: [0; HEADER],
            header_len: 0,
            payload_left: 0,
            tokens: BURST,
            updated: now,
        }
    }

    /// Walks `bytes` as read from the client; `now` is asked only at an idle frame. Returns
    /// `false` once the connection has sent more idle frames than its budget allows.
    pub fn read(&mut self, mut bytes: &[u8], now: impl Fn() -> Instant) -> bool {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let skip = self.preface_left.min(bytes.len());
                self.preface_left -= skip;
                bytes = &bytes[skip..];
            } else if self.payload_left > 0 {
                let skip = self.payload_left.min(bytes.len());
                self.payload_left -= skip;
                bytes = &bytes[skip..];
            } else {
                let take = (HEADER - self.header_len).min(bytes.len());
                self.header[self.header_len..self.header_len + take]
                    .copy_from_slice(&bytes[..take]);
                self.header_len += take;
                bytes = &bytes[take..];
                if self.header_len == HEADER {
                    self.header_len = 0;
                    let [a, b, c, kind, flags, ..] = self.header;
                    let length = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                    self.payload_left = length;
                    if idle(kind, flags, length) && !self.take(now()) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Counts `bytes` written to the client.
    pub fn wrote(&mut self, bytes: usize) {
        #[expect(clippy::cast_precision_loss, reason = "a write's size, far below 2^52")]
        let earned = bytes as f64 / BYTES_PER_TOKEN;
        self.tokens = (self.tokens + earned).min(BURST);
    }

    fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * PER_SECOND).min(BURST);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Whether a frame asks nothing of the application.
fn idle(kind: u8, flags: u8, length: usize) -> bool {
    match kind {
        PING | SETTINGS | PRIORITY | WINDOW_UPDATE | RST_STREAM => true,
        DATA => length == 0 && flags & END_STREAM == 0,
        kind => kind > LAST_KNOWN,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        on_stream(1, kind, flags, payload)
    }

    fn on_stream(stream: u8, kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut bytes = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        bytes.extend([0, 0, 0, stream]);
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn window_updates_and_resets_count_on_any_stream() {
        for (stream, kind, payload) in [
            (0, WINDOW_UPDATE, [0, 0, 0, 1]),
            (1, WINDOW_UPDATE, [0, 0, 0, 1]),
            (1, WINDOW_UPDATE, [0x7f, 0xff, 0xff, 0xff]),
            (1, RST_STREAM, [0, 0, 0, 8]),
        ] {
            let start = Instant::now();
            let mut budget = FrameBudget::new(start);
            let mut flood = preface();
            for _ in 0..=BURST as usize {
                flood.extend(on_stream(stream, kind, 0, &payload));
            }
            assert!(!budget.read(&flood, || start), "{kind} on {stream}");
        }
        // A reader's updates are paid for by what the server wrote.
        let start = Instant::now();
        let mut budget = FrameBudget::new(start);
        assert!(budget.read(&preface(), || start));
        for _ in 0..50_000 {
            budget.wrote(16_384);
            assert!(budget.read(&on_stream(1, WINDOW_UPDATE, 0, &[0, 0, 0x40, 0]), || start));
        }
    }

    fn preface() -> Vec<u8> {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(SETTINGS, 0, &[]));
        bytes
    }

    #[test]
    fn a_ping_flood_runs_out_and_a_steady_pinger_does_not() {
        let start = Instant::now();
        let mut flood = FrameBudget::new(start);
        let mut bytes = preface();
        for _ in 0..BURST as usize {
            bytes.extend(frame(PING, 0, &[0; 8]));
        }
        // The preface's SETTINGS took one token: the burst's last ping is one too many.
        assert!(!flood.read(&bytes, || start));

        let mut steady = FrameBudget::new(start);
        assert!(steady.read(&preface(), || start));
        for second in 1..=100 {
            let now = start + Duration::from_secs(second);
            for _ in 0..PER_SECOND as usize {
                assert!(steady.read(&frame(PING, 0, &[0; 8]), || now), "{second}");
            }
        }
    }

    #[test]
    fn data_the_server_writes_pays_for_pings() {
        let start = Instant::now();
        let mut budget = FrameBudget::new(start);
        assert!(budget.read(&preface(), || start));
        // A bandwidth probe: a ping behind every 100-byte message the server sends, far more
        // than the rate, at one instant.
        for _ in 0..50_000 {
            budget.wrote(100);
            assert!(budget.read(&frame(PING, 0, &[0; 8]), || start));
        }
        // Pongs alone do not pay: a flood answered by 17-byte pongs runs out.
        let mut flood = FrameBudget::new(start);
        let mut ran_out = false;
        for _ in 0..20_000 {
            if !flood.read(&frame(PING, 0, &[0; 8]), || start) {
                ran_out = true;
                break;
            }
            flood.wrote(17);
        }
        assert!(ran_out);
    }

    #[test]
    fn requests_and_flow_control_are_not_counted() {
        let start = Instant::now();
        let mut budget = FrameBudget::new(start);
        let mut bytes = preface();
        for _ in 0..5_000 {
            bytes.extend(frame(1, 0x4, &[0x82; 20])); // HEADERS
            bytes.extend(frame(DATA, END_STREAM, &[])); // an empty body's end
            bytes.extend(frame(DATA, 0, &[7; 300]));
        }
        assert!(budget.read(&bytes, || start));
    }

    #[test]
    fn frames_split_anywhere_are_followed() {
        let start = Instant::now();
        let mut budget = FrameBudget::new(start);
        let mut bytes = preface();
        // A large DATA frame whose payload happens to look like PING frames: not counted.
        let fake: Vec<u8> = (0..2_000).flat_map(|_| frame(PING, 0, &[0; 8])).collect();
        bytes.extend(frame(DATA, 0, &fake[..16_000]));
        for _ in 0..BURST as usize - 1 {
            bytes.extend(frame(PRIORITY, 0, &[0; 5]));
        }
        for byte in &bytes {
            assert!(budget.read(std::slice::from_ref(byte), || start));
        }
        // The SETTINGS and the PRIORITY frames took the whole burst.
        assert!(!budget.read(&frame(250, 0, &[1, 2, 3]), || start));
    }
}
