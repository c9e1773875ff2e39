//! The tenants and branded domains of cached links, each pair held once.
//!
//! A million cached links of one tenant share one [`Place`] instead of holding a million copies
//! of its name: an entry keeps one pointer to it. Pairs no entry holds any longer are dropped
//! when the table has doubled since it was last swept, so the table stays the size of the pairs
//! in use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// A tenant and the branded domain its link answers on (`None`: the default domain).
#[derive(Debug, PartialEq, Eq)]
pub struct Place {
    /// The tenant (visits are counted under it).
    pub tenant: Arc<str>,
    /// The branded domain.
    pub domain: Option<Arc<str>>,
}

/// The places of cached links, by tenant and domain.
#[derive(Debug, Default)]
pub struct Places {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// By `tenant` `\n` `domain` (a tenant name holds no line break).
    places: HashMap<String, Arc<Place>>,
    /// Pairs held after the last sweep.
    swept: usize,
}

impl Places {
    /// The shared place of `tenant` on `domain`.
    pub fn place(&self, tenant: &str, domain: Option<&str>) -> Arc<Place> {
        let mut name = String::with_capacity(tenant.len() + 1 + domain.map_or(0, str::len));
        name.push_str(tenant);
        if let Some(domain) = domain {
            name.push('\n');
            name.push_str(domain);
        }
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(place) = table.places.get(&name) {
            return Arc::clone(place);
        }
        if table.places.len() >= 2 * table.swept.max(32) {
            table.places.retain(|_, place| Arc::strong_count(place) > 1);
            table.swept = table.places.len();
        }
        let place = Arc::new(Place {
            tenant: tenant.into(),
            domain: domain.map(Arc::from),
        });
        table.places.insert(name, Arc::clone(&place));
        place
    }

    /// Heap bytes the table holds: its places, their names and its index (approximate: the
    /// index's spare capacity is counted at its load factor).
    pub fn bytes(&self) -> usize {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let each = size_of::<String>() + size_of::<Arc<Place>>() + 1;
        let index = table.places.capacity() * each * 8 / 7;
        let names: usize = table
            .places
            .iter()
            .map(|(name, place)| {
                let domain = place.domain.as_ref().map_or(0, |d| 16 + d.len());
                // The key, the place, the tenant's name and the domain's.
                name.capacity() + 16 + size_of::<Place>() + 16 + place.tenant.len() + domain
            })
            .sum();
        index + names
    }

    /// Places held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.places.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_is_held_once_and_dropped_when_no_entry_holds_it() {
        let places = Places::default();
        let a = places.place("acme", None);
        let again = places.place("acme", None);
        assert!(Arc::ptr_eq(&a, &again));
        let branded = places.place("acme", Some("go.acme.example"));
        assert!(!Arc::ptr_eq(&a, &branded));
        assert_eq!(branded.domain.as_deref(), Some("go.acme.example"));
        // A tenant named like another's pair is its own place.
        let odd = places.place("acme go.acme.example", None);
        assert!(!Arc::ptr_eq(&odd, &branded));
        drop((again, branded, odd));
        // Places no one holds go once the table has doubled since its last sweep.
        for i in 0..200 {
            drop(places.place(&format!("tenant-{i}"), None));
        }
        assert!(places.len() <= 64, "{} places held", places.len());
        let still = places.place("acme", None);
        assert!(Arc::ptr_eq(&a, &still), "a place in use was dropped");
        assert!(places.bytes() > 0);
    }
}
