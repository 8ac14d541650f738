//! The name of a flow or of a flow schema, as a request carries it: a
//! short name is kept in place, so that classifying a request allocates
//! nothing.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Names of up to this many bytes are kept in place.
const INLINE: usize = 22;

/// The name of a flow (Kubernetes' flow distinguisher: a user name, a
/// namespace) or of a flow schema, as [`Class`](crate::Class) carries it.
/// A name of up to 22 bytes is kept in place, without an allocation;
/// a longer one on the heap. It reads as a `str` and compares, hashes and
/// prints as one.
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
#[derive(Clone)]
pub struct Name(Repr);

#[derive(Clone)]
enum Repr {
    /// The first `len` bytes of `bytes`, copied from a `str`.
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(Box<str>),
}

impl Name {
    /// The name as a string slice.
    ///
    /// ```
    /// use fair_admission::Name;
    /// assert_eq!(Name::from(String::from("bob")).as_str(), "bob");
    /// ```
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Always valid: the bytes were copied from a `str` whole.
            Repr::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Repr::Heap(name) => name,
        }
    }
}

impl Name {
    /// The name's bytes (UTF-8), without checking them again.
    #[cfg(feature = "tower")]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(name) => name.as_bytes(),
        }
    }
}

impl Default for Name {
    /// The empty name (no flow schema, no distinguisher).
    fn default() -> Self {
        Name::from("")
    }
}

impl From<&str> for Name {
    fn from(name: &str) -> Self {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..name.len()].copy_from_slice(name.as_bytes());
                Name(Repr::Inline { len, bytes })
            }
            _ => Name(Repr::Heap(name.into())),
        }
    }
}

impl From<String> for Name {
    /// A short name is copied in place (and the `String` dropped); a long
    /// one keeps the `String`'s buffer.
    fn from(name: String) -> Self {
        if name.len() <= INLINE {
            Name::from(name.as_str())
        } else {
            Name(Repr::Heap(name.into_boxed_str()))
        }
    }
}

impl From<&String> for Name {
    fn from(name: &String) -> Self {
        Name::from(name.as_str())
    }
}

impl From<Box<str>> for Name {
    fn from(name: Box<str>) -> Self {
        Name::from(String::from(name))
    }
}

impl From<Name> for String {
    fn from(name: Name) -> Self {
        match name.0 {
            Repr::Heap(name) => name.into(),
            Repr::Inline { .. } => name.as_str().to_owned(),
        }
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

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

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

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Name {
    /// As the `str` hashes.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_every_length_read_back_as_given() {
        let mut text = String::new();
        while text.len() <= 40 {
            let (name, len) = (Name::from(text.as_str()), text.len());
            assert_eq!(name, text.as_str(), "{len} bytes");
            assert_eq!(Name::from(text.clone()), name);
            assert_eq!(String::from(name.clone()), text);
            assert_eq!(
                matches!(name.0, Repr::Inline { .. }),
                len <= INLINE,
                "{len} bytes"
            );
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
        use std::hash::BuildHasher;
        for s in ["", "alice", "a-name-longer-than-twenty-two-bytes"] {
            let name = Name::from(s);
            assert_eq!(hasher.hash_one(&name), hasher.hash_one(s));
            assert_eq!(hasher.hash_one((&name, &name)), hasher.hash_one((s, s)));
        }
        let (a, b) = (Name::from("a"), Name::from("b"));
        assert_eq!(a.cmp(&b), Ordering::Less);
        assert_eq!(format!("{:?}", Name::from("x\"y")), "\"x\\\"y\"");
    }
}
