//! The name of a flow or of a flow schema, as a request carries it: a
//! short name is kept in place, so that classifying a request allocates
//! nothing.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use compact_str::CompactString;

/// The name of a flow (Kubernetes' flow distinguisher: a user name, a
/// namespace) or of a flow schema, as the layer's `Class` carries it.
/// A name of up to 24 bytes (on 64-bit targets) is kept in place, without
/// an allocation; a longer one on the heap. It reads as a `str` and
/// compares, orders, hashes and prints as one.
///
/// ```
/// use fair_admission::Name;
/// let user = Name::from("alice");
/// assert_eq!(user, "alice");
/// assert_eq!(user.len(), 5);
/// assert_eq!(user.to_string(), "alice");
/// let long = Name::from("system:serviceaccount:kube-system:generic-garbage-collector");
/// assert!(long.starts_with("system:serviceaccount:"));
/// assert_eq!(Name::default(), "");
/// ```
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(CompactString);

impl Name {
    /// The name as a string slice.
    ///
    /// ```
    /// use fair_admission::Name;
    /// assert_eq!(Name::from(String::from("bob")).as_str(), "bob");
    /// ```
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl From<&str> for Name {
    fn from(name: &str) -> Self {
        Name(CompactString::from(name))
    }
}

impl From<String> for Name {
    /// A short name is copied in place (and the `String` dropped); a long
    /// one keeps the `String`'s buffer.
    fn from(name: String) -> Self {
        Name(CompactString::from(name))
    }
}

impl From<&String> for Name {
    fn from(name: &String) -> Self {
        Name::from(name.as_str())
    }
}

impl From<Box<str>> for Name {
    fn from(name: Box<str>) -> Self {
        Name(CompactString::from(name))
    }
}

impl From<Name> for String {
    fn from(name: Name) -> Self {
        name.0.into_string()
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;
    use std::hash::BuildHasher;

    #[test]
    fn names_of_every_length_read_back_as_given() {
        let mut text = String::new();
        while text.len() <= 40 {
            let (name, len) = (Name::from(text.as_str()), text.len());
            assert_eq!(name, text.as_str(), "{len} bytes");
            assert_eq!(Name::from(text.clone()), name);
            assert_eq!(Name::from(text.clone().into_boxed_str()), name);
            assert_eq!(String::from(name.clone()), text);
            // Short names are kept in place.
            assert_eq!(!name.0.is_heap_allocated(), len <= 24, "{len} bytes");
            // Multi-byte characters across the inline boundary.
            text.push(if text.chars().count().is_multiple_of(3) {
                'é'
            } else {
                'a'
            });
        }
    }

    #[test]
    fn a_name_hashes_and_orders_as_its_str() {
        let hasher = foldhash::fast::FixedState::with_seed(7);
        for s in ["", "alice", "a-name-longer-than-twenty-four-bytes"] {
            let name = Name::from(s);
            assert_eq!(hasher.hash_one(&name), hasher.hash_one(s));
            assert_eq!(hasher.hash_one((&name, &name)), hasher.hash_one((s, s)));
        }
        let (a, b) = (Name::from("a"), Name::from("b"));
        assert_eq!(a.cmp(&b), Ordering::Less);
        assert_eq!(format!("{:?}", Name::from("x\"y")), "\"x\\\"y\"");
    }
}
