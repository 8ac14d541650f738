//! The identity an object's backoff belongs to.

use std::fmt;
use std::hash::{Hash, Hasher};

use kube::runtime::reflector::{Lookup, ObjectRef};

/// An object's reference (kind, namespace, name) together with its uid: the
/// key of its backoff entry.
///
/// kube-runtime's [`ObjectRef`] compares and hashes without the uid, so an
/// object deleted and created again under the same name would inherit its
/// predecessor's backoff. The kubelet keys its container backoff by pod
/// name, namespace, **uid**, container name and hash, so a recreated pod
/// starts over at the initial delay; `ObjectKey` does the same. Objects
/// without a uid (built locally, never stored) are keyed by reference alone.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use keyed_backoff_kube::ObjectKey;
/// let mut old = ConfigMap::default();
/// old.metadata.name = Some("app".into());
/// old.metadata.uid = Some("1111".into());
/// let mut new = old.clone();
/// new.metadata.uid = Some("2222".into());
/// let key = |cm: &ConfigMap| ObjectKey::new(cm, ());
/// assert_ne!(key(&old), key(&new));
/// assert_eq!(key(&old).reference(), key(&new).reference());
/// assert_eq!(key(&new).uid(), Some("2222"));
/// ```
pub struct ObjectKey<K: Lookup> {
    reference: ObjectRef<K>,
    uid: Option<String>,
}

impl<K: Lookup> ObjectKey<K> {
    /// The key of `obj`, whose resource type is `dyntype` (`()` for types
    /// known at compile time).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectKey;
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// assert_eq!(ObjectKey::new(&cm, ()).uid(), None);
    /// ```
    pub fn new(obj: &K, dyntype: K::DynamicType) -> Self {
        let mut reference = obj.to_object_ref(dyntype);
        // Only the identity is kept: the resource version changes on every
        // write and is no part of it.
        reference.extra.resource_version = None;
        let uid = reference.extra.uid.take();
        Self { reference, uid }
    }

    /// The object's reference: kind, namespace and name.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectKey;
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// assert_eq!(ObjectKey::new(&cm, ()).reference().name, "app");
    /// ```
    pub fn reference(&self) -> &ObjectRef<K> {
        &self.reference
    }

    /// The object's uid, if it had one.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectKey;
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// cm.metadata.uid = Some("42".into());
    /// assert_eq!(ObjectKey::new(&cm, ()).uid(), Some("42"));
    /// ```
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// The key's name in a shared store
    /// ([`shared`](crate::ObjectBackoffBuilder::shared)):
    /// `Kind.group/namespace/name@uid`. The group is left out with its dot
    /// for the core API group, the namespace is empty for a cluster-scoped
    /// object, and `@uid` is left out for an object without a uid. The
    /// version is no part of it, so an object keeps its backoff across an
    /// API version change; every part but the uid is one that Kubernetes
    /// forbids `/` in, so two objects never share a name.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    /// use keyed_backoff_kube::ObjectKey;
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// cm.metadata.namespace = Some("default".into());
    /// cm.metadata.uid = Some("42".into());
    /// assert_eq!(ObjectKey::new(&cm, ()).store_key(), "ConfigMap/default/app@42");
    /// let mut ns = Namespace::default();
    /// ns.metadata.name = Some("team-a".into());
    /// assert_eq!(ObjectKey::new(&ns, ()).store_key(), "Namespace//team-a");
    /// ```
    pub fn store_key(&self) -> String {
        let r = &self.reference;
        let group = K::group(&r.dyntype);
        let mut key = K::kind(&r.dyntype).into_owned();
        if !group.is_empty() {
            key.push('.');
            key.push_str(&group);
        }
        key.push('/');
        key.push_str(r.namespace.as_deref().unwrap_or(""));
        key.push('/');
        key.push_str(&r.name);
        if let Some(uid) = &self.uid {
            key.push('@');
            key.push_str(uid);
        }
        key
    }
}

impl<K: Lookup> Clone for ObjectKey<K>
where
    K::DynamicType: Clone,
{
    fn clone(&self) -> Self {
        Self {
            reference: self.reference.clone(),
            uid: self.uid.clone(),
        }
    }
}

impl<K: Lookup> PartialEq for ObjectKey<K>
where
    K::DynamicType: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.uid == other.uid && self.reference == other.reference
    }
}

impl<K: Lookup> Eq for ObjectKey<K> where K::DynamicType: Eq {}

impl<K: Lookup> Hash for ObjectKey<K>
where
    K::DynamicType: Hash,
{
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.reference.hash(state);
        self.uid.hash(state);
    }
}

impl<K: Lookup> fmt::Debug for ObjectKey<K>
where
    K::DynamicType: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectKey")
            .field("reference", &self.reference)
            .field("uid", &self.uid)
            .finish()
    }
}

/// The reference, then the uid in brackets when there is one.
impl<K: Lookup> fmt::Display for ObjectKey<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.uid {
            Some(uid) => write!(f, "{} [uid {uid}]", self.reference),
            None => write!(f, "{}", self.reference),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::hash::BuildHasher;

    fn key(name: &str, uid: Option<&str>) -> ObjectKey<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.uid = uid.map(Into::into);
        ObjectKey::new(&cm, ())
    }

    #[test]
    fn the_hash_covers_the_reference_and_the_uid() {
        let state = std::collections::hash_map::RandomState::new();
        let h = |k: &ObjectKey<ConfigMap>| state.hash_one(k);
        assert_eq!(h(&key("a", Some("1"))), h(&key("a", Some("1"))));
        assert_ne!(h(&key("a", Some("1"))), h(&key("a", Some("2"))));
        assert_ne!(h(&key("a", Some("1"))), h(&key("b", Some("1"))));
        assert_ne!(h(&key("a", None)), h(&key("a", Some("1"))));
    }
}
