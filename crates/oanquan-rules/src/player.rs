use std::fmt;
use std::ops::{Index, IndexMut};

use serde::{Deserialize, Serialize};

/// One of the two players.
///
/// The first player sits South, owns ring squares `1..=5` and moves first; the second sits North
/// and owns `7..=11`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub enum Player {
    /// Moves first ("player 1", South).
    First,
    /// Moves second ("player 2", North).
    Second,
}

impl Player {
    /// Both players, first player first.
    pub const ALL: [Player; 2] = [Player::First, Player::Second];

    /// The opponent.
    #[must_use]
    pub const fn other(self) -> Player {
        match self {
            Player::First => Player::Second,
            Player::Second => Player::First,
        }
    }

    /// `0` for the first player, `1` for the second (the convention of `RULES.md`).
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The inverse of [`Player::index`].
    #[must_use]
    pub const fn from_index(index: usize) -> Option<Player> {
        match index {
            0 => Some(Player::First),
            1 => Some(Player::Second),
            _ => None,
        }
    }

    /// The ring indices of this player's five citizen squares, left to right as the player sees
    /// them from their own seat.
    #[must_use]
    pub const fn citizen_squares(self) -> [u8; 5] {
        match self {
            Player::First => [1, 2, 3, 4, 5],
            Player::Second => [7, 8, 9, 10, 11],
        }
    }

    /// Whether ring square `square` is one of this player's citizen squares.
    #[must_use]
    pub const fn owns(self, square: u8) -> bool {
        match self {
            Player::First => square >= 1 && square <= 5,
            Player::Second => square >= 7 && square <= 11,
        }
    }
}

impl fmt::Display for Player {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Player::First => "first player",
            Player::Second => "second player",
        })
    }
}

/// A value for each player, like shakmaty's `ByColor`: indexing by [`Player`] instead of by hand
/// keeps "whose count is this" in the types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByPlayer<T> {
    /// The first player's value.
    pub first: T,
    /// The second player's value.
    pub second: T,
}

impl<T> ByPlayer<T> {
    /// Builds a pair from the two values.
    pub const fn new(first: T, second: T) -> Self {
        ByPlayer { first, second }
    }

    /// Builds a pair by calling `f` for each player.
    pub fn new_with(mut f: impl FnMut(Player) -> T) -> Self {
        ByPlayer {
            first: f(Player::First),
            second: f(Player::Second),
        }
    }

    /// The value of `player`.
    pub const fn get(&self, player: Player) -> &T {
        match player {
            Player::First => &self.first,
            Player::Second => &self.second,
        }
    }

    /// The value of `player`, mutably.
    pub fn get_mut(&mut self, player: Player) -> &mut T {
        match player {
            Player::First => &mut self.first,
            Player::Second => &mut self.second,
        }
    }

    /// Applies `f` to both values.
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> ByPlayer<U> {
        ByPlayer {
            first: f(self.first),
            second: f(self.second),
        }
    }

    /// The values as an array, first player first.
    pub fn into_array(self) -> [T; 2] {
        [self.first, self.second]
    }
}

impl<T> Index<Player> for ByPlayer<T> {
    type Output = T;
    fn index(&self, player: Player) -> &T {
        self.get(player)
    }
}

impl<T> IndexMut<Player> for ByPlayer<T> {
    fn index_mut(&mut self, player: Player) -> &mut T {
        self.get_mut(player)
    }
}

/// The direction of sowing.
///
/// For **both** players, [`Direction::Right`] is "to my right" seen from their own seat, which is
/// `+1` on the ring (increasing index); [`Direction::Left`] is `-1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// `-1` on the ring.
    Left,
    /// `+1` on the ring.
    Right,
}

impl Direction {
    /// Both directions.
    pub const ALL: [Direction; 2] = [Direction::Left, Direction::Right];

    /// `+1` or `-1`.
    #[must_use]
    pub const fn delta(self) -> i8 {
        match self {
            Direction::Left => -1,
            Direction::Right => 1,
        }
    }

    /// `+1` → [`Direction::Right`], `-1` → [`Direction::Left`], anything else `None`.
    #[must_use]
    pub const fn from_delta(delta: i64) -> Option<Direction> {
        match delta {
            1 => Some(Direction::Right),
            -1 => Some(Direction::Left),
            _ => None,
        }
    }

    /// The other direction.
    #[must_use]
    pub const fn reverse(self) -> Direction {
        match self {
            Direction::Left => Direction::Right,
            Direction::Right => Direction::Left,
        }
    }
}
