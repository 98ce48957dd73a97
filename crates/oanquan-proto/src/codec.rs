//! The gRPC codec of every service of this crate: prost's wire format, encoded with fewer passes.
//!
//! prost's `Message::encode` sizes the whole message before writing it, and every nested
//! message is sized again by its parent when its length prefix is written: a message at depth
//! *d* is sized *d* times (the `Position` of a `PlayMoveResponse`'s `Game` three times, its
//! `PlayerPair`s four). [`Codec`] writes the same bytes in fewer passes:
//!
//! * every message is written without the top-level sizing pass (tonic's buffer grows as
//!   needed, so the capacity check it serves cannot fail);
//! * `PlayMoveResponse`, the reply to every move, is written here field by field, with its
//!   nested messages (the record and its steps, the game with its positions, seats and times):
//!   each one's content is written first and its length put in front afterwards, so none is
//!   sized at all; varints are written at once rather than byte by byte; and the game's
//!   position, almost always the record's, is copied from the record's bytes. What a move's
//!   game rarely has (a result, a time control, clocks) is written by prost, unsized.
//!
//! The bytes are prost's exactly (tests compare them with `Message::encode_to_vec`); decoding
//! is prost's.

use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::Range;

use prost::Message;
use prost::bytes::BufMut;
use prost::encoding::{WireType, encode_varint};
use tonic::Status;
use tonic::codec::{BufferSettings, EncodeBuf, Encoder};

use crate::v1;

/// prost's wire format for `T` (encoded) and `U` (decoded); given to the generated services and
/// clients as their codec (`codec_path` in this crate's build script).
#[derive(Debug, Clone, Copy)]
pub struct Codec<T, U> {
    _types: PhantomData<fn(T) -> U>,
}

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Self {
            _types: PhantomData,
        }
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = MessageEncoder<T>;
    type Decoder = tonic_prost::ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        MessageEncoder { _type: PhantomData }
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::new(BufferSettings::default())
    }
}

/// The encoder of [`Codec`].
#[derive(Debug, Clone, Copy)]
pub struct MessageEncoder<T> {
    _type: PhantomData<fn(T)>,
}

impl<T: Message + 'static> Encoder for MessageEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // The type test is resolved at compile time for each `T`.
        if let Some(response) = (&item as &dyn Any).downcast_ref::<v1::PlayMoveResponse>() {
            with_scratch(|out| {
                play_move_response(response, out);
                buf.put_slice(out);
            });
        } else {
            item.encode_raw(buf);
        }
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

/// `message` encoded as [`Codec`] encodes it, for tests and other transports.
#[must_use]
pub fn encode_to_vec<T: Message + 'static>(message: &T) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(response) = (message as &dyn Any).downcast_ref::<v1::PlayMoveResponse>() {
        play_move_response(response, &mut out);
    } else {
        message.encode_raw(&mut out);
    }
    out
}

/// Runs `f` with this thread's empty scratch buffer, which keeps its capacity from one response
/// to the next (a fresh one if it is already in use, which encoding never does).
fn with_scratch(f: impl FnOnce(&mut Vec<u8>)) {
    thread_local! {
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut out) => {
            out.clear();
            f(&mut out);
            // A rare large response does not keep its memory on the thread.
            if out.capacity() > 64 * 1024 {
                *out = Vec::new();
            }
        }
        Err(_) => f(&mut Vec::new()),
    });
}

// The writers below follow what `prost`'s derive writes (fields by tag; in proto3 a scalar only
// when it is not its default, an `optional` scalar or a message when present, every entry of a
// repeated field, packed for scalars); each destructures its message completely, so a field
// added to the `.proto` does not compile until it is written here too.

/// A varint, written at once (prost's `encode_varint` writes it byte by byte). Most are a single
/// byte, the case kept inline.
#[inline(always)]
fn varint(value: u64, out: &mut Vec<u8>) {
    if value < 0x80 {
        out.push(value as u8);
    } else {
        long_varint(value, out);
    }
}

#[inline(never)]
fn long_varint(value: u64, out: &mut Vec<u8>) {
    let mut bytes = [0u8; 10];
    let mut rest = value;
    let mut len = 0;
    while rest >= 0x80 {
        bytes[len] = (rest as u8) | 0x80;
        rest >>= 7;
        len += 1;
    }
    bytes[len] = rest as u8;
    out.extend_from_slice(&bytes[..=len]);
}

#[inline(always)]
fn key(tag: u32, wire_type: WireType, out: &mut Vec<u8>) {
    varint(u64::from((tag << 3) | wire_type as u32), out);
}

/// A `uint32` field, also when zero (callers leave out the defaults of proto3 scalars).
#[inline]
fn uint32(tag: u32, value: u32, out: &mut Vec<u8>) {
    key(tag, WireType::Varint, out);
    varint(u64::from(value), out);
}

/// An `int32` or enum field: negative values are sign-extended to ten bytes, as protobuf wants.
#[inline]
fn int32(tag: u32, value: i32, out: &mut Vec<u8>) {
    key(tag, WireType::Varint, out);
    varint(i64::from(value) as u64, out);
}

#[inline]
fn int64(tag: u32, value: i64, out: &mut Vec<u8>) {
    key(tag, WireType::Varint, out);
    varint(value as u64, out);
}

#[inline]
fn boolean(tag: u32, value: bool, out: &mut Vec<u8>) {
    key(tag, WireType::Varint, out);
    out.push(u8::from(value));
}

fn string(tag: u32, value: &str, out: &mut Vec<u8>) {
    key(tag, WireType::LengthDelimited, out);
    varint(value.len() as u64, out);
    out.extend_from_slice(value.as_bytes());
}

/// Appends field `tag`, length-delimited, whose content `write` appends. The length is not known
/// before the content is written: one byte is kept for it, enough below 128 bytes; a longer
/// content is moved up behind its longer length. Returns by how many bytes the content moved.
fn delimited(tag: u32, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) -> usize {
    key(tag, WireType::LengthDelimited, out);
    let at = out.len();
    out.push(0);
    write(out);
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return 0;
    }
    let mut header = [0u8; 10];
    let header_len = {
        let mut rest = &mut header[..];
        encode_varint(len as u64, &mut rest);
        10 - rest.len()
    };
    let moved = header_len - 1;
    out.resize(out.len() + moved, 0);
    out.copy_within(at + 1..at + 1 + len, at + header_len);
    out[at..at + header_len].copy_from_slice(&header[..header_len]);
    moved
}

/// Field `tag` holding `msg`, written by prost but without sizing it first.
fn container(tag: u32, msg: &impl Message, out: &mut Vec<u8>) {
    delimited(tag, out, |out| msg.encode_raw(out));
}

fn play_move_response(response: &v1::PlayMoveResponse, out: &mut Vec<u8>) {
    let v1::PlayMoveResponse { record, game } = response;
    let mut record_position = None;
    if let Some(record) = record {
        let moved = delimited(1, out, |out| record_position = move_record(record, out));
        if let Some(written) = &mut record_position {
            written.content.start += moved;
            written.content.end += moved;
        }
    }
    if let Some(game) = game {
        delimited(2, out, |out| {
            game_fields(game, record_position.as_ref(), out)
        });
    }
}

/// A position already written (its content's place in the output), to copy when the same
/// position is written again.
struct Written<'a> {
    position: &'a v1::Position,
    content: Range<usize>,
}

fn move_record<'a>(record: &'a v1::MoveRecord, out: &mut Vec<u8>) -> Option<Written<'a>> {
    let v1::MoveRecord {
        number,
        player,
        r#move,
        steps,
        position,
        play_time,
    } = record;
    if *number != 0 {
        uint32(1, *number, out);
    }
    if *player != 0 {
        int32(2, *player, out);
    }
    if let Some(mv) = r#move {
        delimited(3, out, |out| move_fields(mv, out));
    }
    for step in steps {
        delimited(4, out, |out| step_fields(step, out));
    }
    let mut written = None;
    if let Some(position) = position {
        let mut start = 0;
        let moved = delimited(5, out, |out| {
            start = out.len();
            position_fields(position, out);
        });
        written = Some(Written {
            position,
            content: start + moved..out.len(),
        });
    }
    if let Some(time) = play_time {
        delimited(6, out, |out| timestamp_fields(time, out));
    }
    written
}

fn move_fields(mv: &v1::Move, out: &mut Vec<u8>) {
    let v1::Move { square, direction } = mv;
    if let Some(square) = square {
        uint32(1, *square, out);
    }
    if *direction != 0 {
        int32(2, *direction, out);
    }
}

fn step_fields(step: &v1::Step, out: &mut Vec<u8>) {
    use v1::step::{
        Capture, CaptureImmature, CaptureProtected, GameOver, Kind, PickUp, Refill, Sow,
        StopAtMandarin, StopTwoEmpty,
    };
    let v1::Step { kind } = step;
    let Some(kind) = kind else {
        return;
    };
    match kind {
        Kind::PickUp(PickUp {
            square,
            stones,
            relay,
        }) => delimited(1, out, |out| {
            optional_uint32(1, *square, out);
            if *stones != 0 {
                uint32(2, *stones, out);
            }
            if *relay {
                boolean(3, true, out);
            }
        }),
        Kind::Sow(Sow { square }) => delimited(2, out, |out| optional_uint32(1, *square, out)),
        Kind::StopAtMandarin(StopAtMandarin { square }) => {
            delimited(3, out, |out| optional_uint32(1, *square, out))
        }
        Kind::StopTwoEmpty(StopTwoEmpty { gap, next }) => delimited(4, out, |out| {
            optional_uint32(1, *gap, out);
            optional_uint32(2, *next, out);
        }),
        Kind::Capture(Capture {
            square,
            stones,
            pieces,
            player,
        }) => delimited(5, out, |out| {
            optional_uint32(1, *square, out);
            if *stones != 0 {
                uint32(2, *stones, out);
            }
            if *pieces != 0 {
                uint32(3, *pieces, out);
            }
            if *player != 0 {
                int32(4, *player, out);
            }
        }),
        Kind::CaptureProtected(CaptureProtected { square }) => {
            delimited(6, out, |out| optional_uint32(1, *square, out))
        }
        Kind::CaptureImmature(CaptureImmature { square }) => {
            delimited(7, out, |out| optional_uint32(1, *square, out))
        }
        Kind::Refill(Refill {
            player,
            captured_after,
        }) => delimited(8, out, |out| {
            if *player != 0 {
                int32(1, *player, out);
            }
            if *captured_after != 0 {
                int32(2, *captured_after, out);
            }
        }),
        Kind::GameOver(GameOver { reason, collected }) => delimited(9, out, |out| {
            if *reason != 0 {
                int32(1, *reason, out);
            }
            if let Some(pair) = collected {
                delimited(2, out, |out| pair_fields(pair, out));
            }
        }),
    };
}

#[inline]
fn optional_uint32(tag: u32, value: Option<u32>, out: &mut Vec<u8>) {
    if let Some(value) = value {
        uint32(tag, value, out);
    }
}

fn timestamp_fields(time: &prost_types::Timestamp, out: &mut Vec<u8>) {
    let prost_types::Timestamp { seconds, nanos } = time;
    if *seconds != 0 {
        int64(1, *seconds, out);
    }
    if *nanos != 0 {
        int32(2, *nanos, out);
    }
}

fn pair_fields(pair: &v1::PlayerPair, out: &mut Vec<u8>) {
    let v1::PlayerPair { first, second } = pair;
    if *first != 0 {
        int32(1, *first, out);
    }
    if *second != 0 {
        int32(2, *second, out);
    }
}

fn rule_set_fields(rules: &v1::RuleSet, out: &mut Vec<u8>) {
    let v1::RuleSet {
        mandarin_setup,
        quan_value,
        empty_mandarin,
        protected_plies,
        immature_mandarin_min_stones,
        end_condition,
        repetition_limit,
        max_plies,
    } = rules;
    if *mandarin_setup != 0 {
        int32(1, *mandarin_setup, out);
    }
    if *quan_value != 0 {
        uint32(2, *quan_value, out);
    }
    if *empty_mandarin != 0 {
        int32(3, *empty_mandarin, out);
    }
    if *protected_plies != 0 {
        uint32(4, *protected_plies, out);
    }
    if *immature_mandarin_min_stones != 0 {
        uint32(5, *immature_mandarin_min_stones, out);
    }
    if *end_condition != 0 {
        int32(6, *end_condition, out);
    }
    if *repetition_limit != 0 {
        uint32(7, *repetition_limit, out);
    }
    if *max_plies != 0 {
        uint32(8, *max_plies, out);
    }
}

fn seat_fields(seat: &v1::Seat, out: &mut Vec<u8>) {
    let v1::Seat {
        player,
        occupied,
        display_name,
        kind,
        computer_level,
        account,
    } = seat;
    if *player != 0 {
        int32(1, *player, out);
    }
    if *occupied {
        boolean(2, true, out);
    }
    if !display_name.is_empty() {
        string(3, display_name, out);
    }
    if *kind != 0 {
        int32(4, *kind, out);
    }
    if *computer_level != 0 {
        uint32(5, *computer_level, out);
    }
    if let Some(account) = account {
        delimited(6, out, |out| {
            let v1::SeatAccount {
                username,
                rating,
                provisional,
            } = account;
            if !username.is_empty() {
                string(1, username, out);
            }
            if *rating != 0 {
                int32(2, *rating, out);
            }
            if *provisional {
                boolean(3, true, out);
            }
        });
    }
}

fn game_fields(game: &v1::Game, record_position: Option<&Written<'_>>, out: &mut Vec<u8>) {
    let v1::Game {
        id,
        rule_set,
        preset,
        first_seat,
        second_seat,
        status,
        start_position,
        position,
        move_count,
        result,
        create_time,
        update_time,
        time_control,
        clocks,
        turn_start_time,
        draw_offer,
        rematch_of,
        rematch,
        rematch_offer,
        rematch_deadline,
        rated,
    } = game;
    if !id.is_empty() {
        string(1, id, out);
    }
    if let Some(rules) = rule_set {
        delimited(2, out, |out| rule_set_fields(rules, out));
    }
    if !preset.is_empty() {
        string(3, preset, out);
    }
    if let Some(seat) = first_seat {
        delimited(4, out, |out| seat_fields(seat, out));
    }
    if let Some(seat) = second_seat {
        delimited(5, out, |out| seat_fields(seat, out));
    }
    if *status != 0 {
        int32(6, *status, out);
    }
    if let Some(start) = start_position {
        delimited(7, out, |out| start_position_fields(start, out));
    }
    if let Some(position) = position {
        delimited(8, out, |out| match record_position {
            Some(written) if written.position == position => {
                out.extend_from_within(written.content.clone());
            }
            _ => position_fields(position, out),
        });
    }
    if *move_count != 0 {
        uint32(9, *move_count, out);
    }
    // Set only for some games (finished, timed): prost writes their content.
    if let Some(result) = result {
        container(10, result, out);
    }
    if let Some(time) = create_time {
        delimited(11, out, |out| timestamp_fields(time, out));
    }
    if let Some(time) = update_time {
        delimited(12, out, |out| timestamp_fields(time, out));
    }
    if let Some(control) = time_control {
        container(13, control, out);
    }
    if let Some(clocks) = clocks {
        container(14, clocks, out);
    }
    if let Some(time) = turn_start_time {
        delimited(15, out, |out| timestamp_fields(time, out));
    }
    if *draw_offer != 0 {
        int32(16, *draw_offer, out);
    }
    if !rematch_of.is_empty() {
        string(17, rematch_of, out);
    }
    if !rematch.is_empty() {
        string(18, rematch, out);
    }
    if *rematch_offer != 0 {
        int32(19, *rematch_offer, out);
    }
    if let Some(time) = rematch_deadline {
        delimited(20, out, |out| timestamp_fields(time, out));
    }
    if *rated {
        boolean(21, true, out);
    }
}

/// [`position_fields`] for a game's start position, the same for every move of a game and for
/// every game of a rule set: each thread keeps the last one it wrote with its bytes.
fn start_position_fields(start: &v1::Position, out: &mut Vec<u8>) {
    thread_local! {
        static LAST: RefCell<Option<(v1::Position, Vec<u8>)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let Ok(mut last) = last.try_borrow_mut() else {
            return position_fields(start, out);
        };
        match last.as_ref() {
            Some((position, bytes)) if position == start => out.extend_from_slice(bytes),
            _ => {
                let at = out.len();
                position_fields(start, out);
                *last = Some((start.clone(), out[at..].to_vec()));
            }
        }
    });
}

fn position_fields(position: &v1::Position, out: &mut Vec<u8>) {
    let v1::Position {
        squares,
        pieces,
        captured,
        captured_pieces,
        scores,
        to_move,
        ply,
        over,
        end_reason,
        outcome,
        notation,
    } = position;
    packed_uint32(1, squares, out);
    packed_uint32(2, pieces, out);
    for (tag, pair) in [(3, captured), (4, captured_pieces), (5, scores)] {
        if let Some(pair) = pair {
            delimited(tag, out, |out| pair_fields(pair, out));
        }
    }
    if *to_move != 0 {
        int32(6, *to_move, out);
    }
    if *ply != 0 {
        uint32(7, *ply, out);
    }
    if *over {
        boolean(8, true, out);
    }
    if *end_reason != 0 {
        int32(9, *end_reason, out);
    }
    if *outcome != 0 {
        int32(10, *outcome, out);
    }
    if !notation.is_empty() {
        string(11, notation, out);
    }
}

/// A packed repeated `uint32` (proto3's default for repeated scalars), left out when empty.
fn packed_uint32(tag: u32, values: &[u32], out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    delimited(tag, out, |out| {
        for &value in values {
            varint(u64::from(value), out);
        }
    });
}

#[cfg(test)]
mod tests;
