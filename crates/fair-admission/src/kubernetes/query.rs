//! The LIST options a request's query string carries, read as Kubernetes
//! reads them (`url.Values` into `metav1.ListOptions`): the first value of
//! each key, percent-decoded, `+` as a space.

/// The list options the work estimate needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListOptions {
    pub(crate) label_selector: String,
    pub(crate) field_selector: String,
    pub(crate) resource_version: String,
    pub(crate) resource_version_match: String,
    pub(crate) continue_token: String,
    pub(crate) limit: i64,
    /// `None` when absent; any value but `0` and `false` (any case) is true.
    pub(crate) send_initial_events: Option<bool>,
}

/// Why a query cannot be read as list options: an integer field that is
/// not one, as Kubernetes refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadQuery;

impl ListOptions {
    /// Reads `query` (without the `?`). Pairs that are not valid (a
    /// semicolon, a bad escape) are skipped, as Go's parser skips them.
    pub(crate) fn from_query(query: &str) -> Result<Self, BadQuery> {
        let mut out = ListOptions::default();
        let mut seen: Vec<String> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            if pair.contains(';') {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (Some(key), Some(value)) = (unescape(key), unescape(value)) else {
                continue;
            };
            // Only the first value of a key counts.
            if seen.contains(&key) {
                continue;
            }
            match key.as_str() {
                "labelSelector" => out.label_selector = value,
                "fieldSelector" => out.field_selector = value,
                "resourceVersion" => out.resource_version = value,
                "resourceVersionMatch" => out.resource_version_match = value,
                "continue" => out.continue_token = value,
                "limit" => out.limit = parse_int(&value)?,
                "timeoutSeconds" => {
                    parse_int(&value)?;
                }
                "sendInitialEvents" => out.send_initial_events = Some(truthy(&value)),
                _ => {}
            }
            seen.push(key);
        }
        Ok(out)
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional sign, then digits.
fn parse_int(value: &str) -> Result<i64, BadQuery> {
    value.parse().map_err(|_| BadQuery)
}

/// Kubernetes' string-to-bool: false only for `0` and `false` (any case).
fn truthy(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

/// Percent-decodes a query component, `+` being a space; `None` for a
/// malformed escape or bytes that are not UTF-8.
fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_value_of_each_key_decoded() {
        let q =
            "labelSelector=app%3Dweb+x&limit=5&limit=7&resourceVersion=0&sendInitialEvents=FALSE";
        let o = ListOptions::from_query(q).unwrap();
        assert_eq!(o.label_selector, "app=web x");
        assert_eq!((o.limit, o.resource_version.as_str()), (5, "0"));
        assert_eq!(o.send_initial_events, Some(false));
        assert_eq!(
            ListOptions::from_query("sendInitialEvents")
                .unwrap()
                .send_initial_events,
            Some(true)
        );
    }

    #[test]
    fn a_bad_integer_is_refused_and_bad_pairs_are_skipped() {
        assert_eq!(ListOptions::from_query("limit=invalid"), Err(BadQuery));
        assert_eq!(ListOptions::from_query("timeoutSeconds=1.5"), Err(BadQuery));
        assert_eq!(ListOptions::from_query("limit=%zz").unwrap().limit, 0);
        assert_eq!(ListOptions::from_query("limit=3;x=1").unwrap().limit, 0);
        assert_eq!(ListOptions::from_query("limit=-4").unwrap().limit, -4);
    }
}
