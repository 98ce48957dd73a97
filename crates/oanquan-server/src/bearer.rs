//! The one reading of an `Authorization` value that both listeners share: the gRPC API's tokens
//! and keys, and the metrics token.

/// The credential of an `Authorization` value `Bearer <credential>`: the scheme in any case
/// (RFC 7235 § 2.1), one or more spaces, then the credential, spaces around the whole trimmed.
/// `None` for another scheme, no scheme, or no credential.
pub(crate) fn credential(value: &str) -> Option<&str> {
    let (scheme, credential) = value.trim().split_once(' ')?;
    let credential = credential.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !credential.is_empty()).then_some(credential)
}
