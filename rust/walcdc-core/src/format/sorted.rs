//! Hash maps and sets serialized in key order (`#[serde(serialize_with = ...)]`), so that the
//! same content always gives the same bytes (cursors and reader states compare equal across
//! runs). The encoded shape is a plain map or sequence: it reads back into a hash map as before.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};

use serde::ser::{Serialize, SerializeMap, Serializer};

/// A map, its entries in key order.
pub fn map<K, V, H, S>(m: &HashMap<K, V, H>, s: S) -> Result<S::Ok, S::Error>
where
    K: Ord + Hash + Serialize,
    V: Serialize,
    H: BuildHasher,
    S: Serializer,
{
    let mut entries: Vec<_> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    s.collect_map(entries)
}

/// A set, its items in order.
pub fn set<T, H, S>(v: &HashSet<T, H>, s: S) -> Result<S::Ok, S::Error>
where
    T: Ord + Hash + Serialize,
    H: BuildHasher,
    S: Serializer,
{
    let mut items: Vec<_> = v.iter().collect();
    items.sort_unstable();
    s.collect_seq(items)
}

/// A map of maps, both levels in key order.
pub fn map_of_maps<K, K2, V, H, H2, S>(m: &HashMap<K, HashMap<K2, V, H2>, H>, s: S) -> Result<S::Ok, S::Error>
where
    K: Ord + Hash + Serialize,
    K2: Ord + Hash + Serialize,
    V: Serialize,
    H: BuildHasher,
    H2: BuildHasher,
    S: Serializer,
{
    struct Inner<'a, K2, V, H2>(&'a HashMap<K2, V, H2>);
    impl<K2: Ord + Hash + Serialize, V: Serialize, H2: BuildHasher> Serialize for Inner<'_, K2, V, H2> {
        fn serialize<S2: Serializer>(&self, s: S2) -> Result<S2::Ok, S2::Error> {
            map(self.0, s)
        }
    }
    let mut entries: Vec<_> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = s.serialize_map(Some(entries.len()))?;
    for (k, v) in entries {
        out.serialize_entry(k, &Inner(v))?;
    }
    out.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct T {
        #[serde(serialize_with = "map")]
        m: HashMap<i32, String>,
        #[serde(serialize_with = "set")]
        s: HashSet<i32>,
        #[serde(serialize_with = "map_of_maps")]
        n: HashMap<i32, HashMap<i32, u8>>,
    }

    #[test]
    fn same_content_same_bytes_and_it_reads_back() {
        let make = |order: &[i32]| {
            let mut t = T { m: HashMap::new(), s: HashSet::new(), n: HashMap::new() };
            for &i in order {
                t.m.insert(i, i.to_string());
                t.s.insert(i);
                t.n.entry(i % 3).or_default().insert(i, i as u8);
            }
            t
        };
        let a = make(&(0..200).collect::<Vec<_>>());
        let b = make(&(0..200).rev().collect::<Vec<_>>());
        let (ba, bb) = (postcard::to_stdvec(&a).unwrap(), postcard::to_stdvec(&b).unwrap());
        assert_eq!(ba, bb);
        assert_eq!(postcard::from_bytes::<T>(&ba).unwrap(), a);
    }
}
