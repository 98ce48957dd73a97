//! Responses that hold a list cut to what fits in one message of `--max-message-size`: a
//! message over it fails the whole call with OUT_OF_RANGE, and for the lists every client reads
//! (the lobby, the games, the seeks) one client's long names made that everyone's failure.

/// What a response's fields around a list take beyond the list itself, at most.
pub(crate) const FRAMING: usize = 64;

/// How many of a list's first items fit in a number of bytes, and the bytes they take.
pub(crate) struct Fitting {
    pub(crate) count: usize,
    pub(crate) bytes: usize,
}

/// How many of `items`, from the first, fit in `room` bytes as a repeated field.
///
/// Every open seek and up to 200 games went into one message (the lobby's snapshot, its seek
/// list, ListSeeks): an outside probe's 300 seekers, or its games with long names, outgrew a
/// 64 KiB `--max-message-size`, and then every client's WatchLobby failed. What does not fit
/// is left out: the oldest games, the newest seeks (those made later arrive as SeekAdded).
pub(crate) fn fitting<T: prost::Message>(items: &[T], room: usize) -> Fitting {
    let mut bytes = 0usize;
    let mut count = 0;
    for item in items {
        let len = item.encoded_len();
        let framed = 1 + prost::length_delimiter_len(len) + len;
        if bytes + framed > room {
            break;
        }
        bytes += framed;
        count += 1;
    }
    Fitting { count, bytes }
}

/// `items` cut to those that fit in `room` bytes (see [`fitting`]).
pub(crate) fn fit<T: prost::Message>(items: &mut Vec<T>, room: usize) {
    let count = fitting(items, room).count;
    items.truncate(count);
}

/// A page of `size` items that fits `room` bytes, the first of at most four tries: `query`
/// gives the page of a size (the store's cursor then follows its last item), and a page that
/// does not fit is asked again with as many items as did. The store may change between tries;
/// the last page comes back whatever its size (encoding it then fails with the bound's error).
pub(crate) async fn page_that_fits<T, P, E, Q, F>(
    size: usize,
    room: usize,
    mut query: Q,
    items: impl Fn(&P) -> Vec<T>,
) -> Result<(P, Vec<T>), E>
where
    T: prost::Message,
    Q: FnMut(usize) -> F,
    F: std::future::Future<Output = Result<P, E>>,
{
    let mut size = size;
    let mut tries = 0;
    loop {
        let page = query(size).await?;
        let listed = items(&page);
        let fits = fitting(&listed, room).count.max(1);
        tries += 1;
        if fits >= listed.len() || tries == 4 {
            return Ok((page, listed));
        }
        size = fits;
    }
}
