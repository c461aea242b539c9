//! The app's secret and the tokens derived from it (section 4).
//!
//! A fresh 256-bit secret is drawn from the OS at every start and never leaves
//! this process. Each caller's token is the lowercase hex of
//! HMAC-SHA256(secret, domain ‖ caller), cut to 32 hex characters:
//!
//! | caller | domain | message |
//! |---|---|---|
//! | `Client` | `client` | `client` |
//! | a terminal | `bus` | `bus` ‖ len(env) as u32 BE ‖ env ‖ id as u64 BE |
//! | a lead terminal | `lead` | `lead` ‖ len(env) as u32 BE ‖ env ‖ id as u64 BE |
//!
//! The length prefix keeps two callers from ever sharing a message. A terminal
//! therefore holds a token valid only for itself, and cannot act as another
//! terminal or as Client.

use hmac::{Hmac, KeyInit, Mac};
use rand::TryRng;
use sha2::Sha256;
use subtle::{ConstantTimeEq, CtOption};

use crate::protocol::{Caller, TerminalRef, Token};

/// Characters in a token.
pub const TOKEN_HEX_LEN: usize = 32;

/// Who a caller turned out to be once its token was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Outside the app's terminals, with the api.json token.
    Client,
    /// A terminal spawned with `"lead": true`.
    Lead(TerminalRef),
    /// Any other terminal.
    Terminal(TerminalRef),
    /// The app's durable facet, on behalf of its (phone) clients: Client's
    /// rights, never authenticated by a bus token.
    Durable,
}

impl Principal {
    /// The terminal behind the caller, if it is one.
    pub fn terminal(&self) -> Option<&TerminalRef> {
        match self {
            Principal::Client | Principal::Durable => None,
            Principal::Lead(t) | Principal::Terminal(t) => Some(t),
        }
    }
}

/// The app's secret. Not `Clone`, not `Debug`: it stays where it was drawn (the
/// bus and the app share it behind an `Arc`).
pub struct Secret {
    key: [u8; 32],
    client_token: String,
}

impl Secret {
    /// Draws a fresh secret from the operating system's generator.
    pub fn generate() -> std::io::Result<Secret> {
        let mut key = [0u8; 32];
        rand::rngs::SysRng
            .try_fill_bytes(&mut key)
            .map_err(|e| std::io::Error::other(format!("the OS random generator failed: {e}")))?;
        Ok(Secret::from_key(key))
    }

    fn from_key(key: [u8; 32]) -> Secret {
        let client_token = derive(&key, b"client", None);
        Secret { key, client_token }
    }

    /// The token written to api.json, for `from: "Client"`.
    pub fn client_token(&self) -> Token {
        Token::new(self.client_token.clone())
    }

    /// The token of a plain terminal.
    pub fn bus_token(&self, terminal: &TerminalRef) -> Token {
        Token::new(derive(&self.key, b"bus", Some(terminal)))
    }

    /// The token of a lead terminal.
    pub fn lead_token(&self, terminal: &TerminalRef) -> Token {
        Token::new(derive(&self.key, b"lead", Some(terminal)))
    }

    /// The token a terminal is given: a lead token for a lead terminal.
    pub fn terminal_token(&self, terminal: &TerminalRef, lead: bool) -> Token {
        if lead {
            self.lead_token(terminal)
        } else {
            self.bus_token(terminal)
        }
    }

    /// Step 2 of the order of checks: is `presented` the token of the caller named
    /// in `from`? Compared in constant time; `None` means `unauthorized`.
    pub fn authenticate(&self, from: &Caller, presented: &Token) -> Option<Principal> {
        let presented = presented.expose().as_bytes();
        match from {
            Caller::Client => {
                let ok = presented.ct_eq(self.client_token.as_bytes());
                Option::from(CtOption::new(Principal::Client, ok))
            }
            Caller::Terminal(terminal) => {
                let bus = derive(&self.key, b"bus", Some(terminal));
                let lead = derive(&self.key, b"lead", Some(terminal));
                let is_bus = presented.ct_eq(bus.as_bytes());
                let is_lead = presented.ct_eq(lead.as_bytes());
                if bool::from(is_lead) {
                    Some(Principal::Lead(terminal.clone()))
                } else if bool::from(is_bus) {
                    Some(Principal::Terminal(terminal.clone()))
                } else {
                    None
                }
            }
        }
    }
}

fn derive(key: &[u8; 32], domain: &[u8], terminal: Option<&TerminalRef>) -> String {
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
        Ok(mac) => mac,
        // HMAC takes keys of any length; this arm cannot run.
        Err(_) => return String::new(),
    };
    mac.update(domain);
    if let Some(t) = terminal {
        let env = t.environment.as_bytes();
        mac.update(&u32::try_from(env.len()).unwrap_or(u32::MAX).to_be_bytes());
        mac.update(env);
        mac.update(&t.terminal.to_be_bytes());
    }
    let mut hex = hex::encode(mac.finalize().into_bytes());
    hex.truncate(TOKEN_HEX_LEN);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(env: &str, id: u64) -> TerminalRef {
        TerminalRef {
            environment: env.into(),
            terminal: id,
        }
    }

    #[test]
    fn tokens_are_32_lowercase_hex_and_distinct() {
        let s = Secret::generate().unwrap();
        let tokens = [
            s.client_token(),
            s.bus_token(&t("main", 1)),
            s.lead_token(&t("main", 1)),
            s.bus_token(&t("main", 2)),
            s.bus_token(&t("other", 1)),
        ];
        for (i, a) in tokens.iter().enumerate() {
            assert_eq!(a.expose().len(), TOKEN_HEX_LEN);
            assert!(
                a.expose()
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            );
            for b in &tokens[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn each_token_is_valid_for_its_caller_only() {
        let s = Secret::generate().unwrap();
        let four = t("main", 4);
        let client = Caller::Client;
        let as_four = Caller::Terminal(four.clone());
        let as_five = Caller::Terminal(t("main", 5));
        assert_eq!(
            s.authenticate(&client, &s.client_token()),
            Some(Principal::Client)
        );
        assert_eq!(s.authenticate(&as_four, &s.client_token()), None);
        assert_eq!(s.authenticate(&client, &s.bus_token(&four)), None);
        assert_eq!(s.authenticate(&as_five, &s.bus_token(&four)), None);
        assert_eq!(
            s.authenticate(&as_four, &s.bus_token(&four)),
            Some(Principal::Terminal(four.clone()))
        );
        assert_eq!(
            s.authenticate(&as_four, &s.lead_token(&four)),
            Some(Principal::Lead(four))
        );
    }

    #[test]
    fn a_new_secret_invalidates_old_tokens() {
        let a = Secret::generate().unwrap();
        let b = Secret::generate().unwrap();
        assert_eq!(b.authenticate(&Caller::Client, &a.client_token()), None);
    }

    #[test]
    fn same_key_same_tokens() {
        let a = Secret::from_key([7; 32]);
        let b = Secret::from_key([7; 32]);
        assert_eq!(a.bus_token(&t("main", 3)), b.bus_token(&t("main", 3)));
    }
}
