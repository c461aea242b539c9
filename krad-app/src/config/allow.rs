//! An entry of `[sandbox] allow`: a host a contained terminal may reach
//! (`host`, `host:port`, `*.domain`, `[v6]:port`), parsed once where the
//! config is read and matched by the sandbox's proxy ([`crate::sandbox::net`]).
//! A leaf: it imports nothing of the app.

/// One entry of an allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The host, lower case, without its `*.` (an address or a name).
    host: String,
    /// `*.domain`: any name under it (not the domain itself).
    wildcard: bool,
    /// The one port allowed, or any.
    port: Option<u16>,
}

impl Rule {
    /// `host`, `host:port`, `*.domain`, `[::1]:port`.
    pub fn parse(entry: &str) -> Result<Rule, String> {
        let bad = |why: &str| {
            Err(format!(
                "[sandbox] allow: {entry:?} {why} (write host, host:port or *.domain)"
            ))
        };
        let entry_trimmed = entry.trim();
        let (host, port) = match split_host_port(entry_trimmed) {
            Some((host, Some(port))) => match port.parse::<u16>() {
                Ok(port) if port > 0 => (host, Some(port)),
                _ => return bad("has no valid port"),
            },
            Some((host, None)) => (host, None),
            None => return bad("is not a host"),
        };
        let (wildcard, host) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if host.is_empty()
            || host.contains(['/', '*', '@', ' '])
            || host.chars().any(char::is_control)
        {
            return bad("is not a host");
        }
        Ok(Rule {
            host: host.to_ascii_lowercase(),
            wildcard,
            port,
        })
    }

    pub(crate) fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        let named = if self.wildcard {
            host.strip_suffix(&self.host)
                .is_some_and(|head| head.ends_with('.'))
        } else {
            host == self.host
        };
        named && self.port.is_none_or(|p| p == port)
    }

    /// The loopback port this rule opens inside the sandbox, if it is one.
    pub(crate) fn loopback_port(&self) -> Option<u16> {
        let loopback = matches!(self.host.as_str(), "127.0.0.1" | "localhost");
        (loopback && !self.wildcard).then_some(self.port).flatten()
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let star = if self.wildcard { "*." } else { "" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => write!(f, "{star}{host}:{port}"),
            None => write!(f, "{star}{host}"),
        }
    }
}

/// `host[:port]`, `[v6][:port]`: the host and the port's text.
pub(crate) fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host, Some(port))),
        Some(_) => None,
        None => Some((text, None)),
    }
}
