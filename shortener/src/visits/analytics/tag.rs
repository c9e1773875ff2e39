//! A rollup cell and hour packed into the [`RollupTag`] a cached link's word holds
//! ([`crate::visits::clicks::PendingClicks`]): the cells most visits fall into (no referrer,
//! the link's own URL, a device class, a country or none) and the hour modulo [`HOURS`].
//! A word is taken within a flush interval of its counts, so the hour is read back as the one
//! of its residue nearest to the time of the take.

use super::aggregate::{Cell, Referrer};
use crate::domain::stats::HOUR;
use crate::domain::{Device, Route};
use crate::visits::clicks::RollupTag;

/// The hour, modulo [`HOURS`], in the low bits; then the device class, then the country.
const HOUR_BITS: u32 = 10;
const HOURS: i64 = 1 << HOUR_BITS;
const DEVICE_SHIFT: u32 = HOUR_BITS;
const COUNTRY_SHIFT: u32 = DEVICE_SHIFT + 3;
const _: () = assert!(COUNTRY_SHIFT + 12 <= RollupTag::BITS);

/// A cell (of a visit a word can hold) and an hour, packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag(u64);

impl From<Tag> for RollupTag {
    fn from(tag: Tag) -> Self {
        RollupTag::new(tag.0 as u32).expect("a tag fits its bits")
    }
}

impl From<RollupTag> for Tag {
    fn from(tag: RollupTag) -> Self {
        Tag(u64::from(tag.bits()))
    }
}

impl Tag {
    /// The tag of a visit in `cell` at `hour` (Unix seconds at the start of the hour), or
    /// `None` for a cell the word does not hold (a referrer, a routed target, a country not
    /// of two ASCII letters).
    pub fn of(cell: &Cell, hour: i64) -> Option<Tag> {
        if cell.referrer != Referrer::None || cell.route != Route::Url {
            return None;
        }
        let country = match cell.country {
            None => 0,
            Some([a, b]) => 1 + letter(a)? * 52 + letter(b)?,
        };
        let device = match cell.device {
            Device::Desktop => 0,
            Device::Mobile => 1,
            Device::Tablet => 2,
            Device::Bot => 3,
            Device::Other => 4,
        };
        let hour = (hour.div_euclid(HOUR)).rem_euclid(HOURS) as u64;
        Some(Tag(hour
            | device << DEVICE_SHIFT
            | country << COUNTRY_SHIFT))
    }

    /// The cell the tag stands for.
    pub fn cell(self) -> Cell {
        let device = match (self.0 >> DEVICE_SHIFT) & 7 {
            0 => Device::Desktop,
            1 => Device::Mobile,
            2 => Device::Tablet,
            3 => Device::Bot,
            _ => Device::Other,
        };
        let country = match (self.0 >> COUNTRY_SHIFT) & 0xfff {
            0 => None,
            n => Some([from_letter((n - 1) / 52), from_letter((n - 1) % 52)]),
        };
        Cell {
            referrer: Referrer::None,
            device,
            country,
            route: Route::Url,
        }
    }

    /// The hour (Unix seconds at its start) the tag stands for, read at `now` (Unix seconds):
    /// the one of its residue nearest to `now`. A word is taken within a flush interval of its
    /// counts (at most a minute), far within the half of [`HOURS`] either way this allows.
    pub fn hour(self, now: i64) -> i64 {
        let current = now.div_euclid(HOUR);
        let held = (self.0 & (HOURS as u64 - 1)) as i64;
        let behind = (current - held).rem_euclid(HOURS);
        let hours_back = if behind > HOURS / 2 {
            behind - HOURS
        } else {
            behind
        };
        (current - hours_back) * HOUR
    }
}

/// An ASCII letter's index among `A..=Z` then `a..=z`.
fn letter(b: u8) -> Option<u64> {
    match b {
        b'A'..=b'Z' => Some(u64::from(b - b'A')),
        b'a'..=b'z' => Some(u64::from(b - b'a') + 26),
        _ => None,
    }
}

fn from_letter(index: u64) -> u8 {
    match index {
        0..26 => b'A' + index as u8,
        _ => b'a' + (index - 26) as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(device: Device, country: Option<[u8; 2]>) -> Cell {
        Cell {
            referrer: Referrer::None,
            device,
            country,
            route: Route::Url,
        }
    }

    const AN_HOUR: i64 = 1_764_932_400; // 2025-12-05 11:00 UTC

    #[test]
    fn a_tag_gives_back_its_cell_and_hour() {
        for device in [
            Device::Desktop,
            Device::Mobile,
            Device::Tablet,
            Device::Bot,
            Device::Other,
        ] {
            for country in [None, Some(*b"DE"), Some(*b"zz"), Some(*b"Az")] {
                let tag = Tag::of(&cell(device, country), AN_HOUR).expect("held");
                assert_eq!(tag.cell(), cell(device, country));
                assert_eq!(tag.hour(AN_HOUR + 59 * 60), AN_HOUR);
                assert_eq!(tag.hour(AN_HOUR + 3 * HOUR), AN_HOUR, "read hours later");
                assert_eq!(tag.hour(AN_HOUR - 2 * HOUR), AN_HOUR, "a clock set back");
            }
        }
        let other = Tag::of(&cell(Device::Bot, None), AN_HOUR + HOUR).expect("held");
        assert_ne!(
            other,
            Tag::of(&cell(Device::Bot, None), AN_HOUR).expect("held")
        );
    }

    #[test]
    fn cells_the_word_cannot_name_are_not_held() {
        let mut referred = cell(Device::Desktop, None);
        referred.referrer = Referrer::Host("a.example".into());
        let mut routed = cell(Device::Desktop, None);
        routed.route = Route::Variant(1);
        for (what, cell) in [
            ("a referrer", referred),
            ("a routed target", routed),
            ("a country of digits", cell(Device::Desktop, Some(*b"1A"))),
            (
                "a country of other bytes",
                cell(Device::Desktop, Some(*b"A-")),
            ),
        ] {
            assert_eq!(Tag::of(&cell, AN_HOUR), None, "{what}");
        }
    }

    #[test]
    fn a_tag_goes_through_the_word_as_it_is() {
        let tag = Tag::of(&cell(Device::Tablet, Some(*b"NZ")), AN_HOUR).expect("held");
        assert_eq!(Tag::from(RollupTag::from(tag)), tag);
    }
}
