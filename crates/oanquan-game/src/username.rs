//! TEMPORARY STUB (replaced by the real module before commit).
use std::fmt;
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Username(String);
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad username")]
pub struct UsernameError;
impl Username {
    pub fn parse(text: &str) -> Result<Username, UsernameError> {
        Ok(Username(text.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn key(&self) -> String {
        self.0.to_lowercase()
    }
}
impl fmt::Display for Username {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
