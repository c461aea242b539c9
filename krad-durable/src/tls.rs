//! The TLS transport of the durable facet: its certificate and its bearer token.
//!
//! * The certificate is the one configured (`cert` and `key`, PEM files, the key
//!   private to the user), or a self-signed one for `localhost`, `127.0.0.1` and
//!   the listen address, made once in the state folder (`tls-cert.pem`,
//!   `tls-key.pem`) and reused at every start so that its fingerprint, which the
//!   user gives Collie, stays the same.
//! * The token is read from a file private to the user (`chmod 600`): at least
//!   32 bytes of printable ASCII without spaces. Without a configured file, a
//!   random one is made in the state folder (`token`). It is checked on every
//!   request, hello included, in constant time ([`Token::matches_header`]).
//!
//! No error message ever holds the token.

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::TryRng;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The file name of a generated token in the state folder.
pub const TOKEN_FILE: &str = "token";
/// The file name of the self-signed certificate in the state folder.
pub const CERT_FILE: &str = "tls-cert.pem";
/// The file name of the self-signed certificate's key in the state folder.
pub const KEY_FILE: &str = "tls-key.pem";
/// The shortest token the seed allows, in bytes.
pub const MIN_TOKEN_LEN: usize = 32;
/// The longest token accepted, in bytes: it travels in a header.
pub const MAX_TOKEN_LEN: usize = 4096;

/// What the app's config says about the TLS transport.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// Where to listen; its IP joins the self-signed certificate's names.
    pub listen: SocketAddr,
    /// The token file; a random one is made in `state_dir` when absent.
    pub token_file: Option<PathBuf>,
    /// A PEM certificate chain, leaf first (with `key`, or neither).
    pub cert: Option<PathBuf>,
    /// The PEM private key of `cert`, private to the user.
    pub key: Option<PathBuf>,
    /// Where a generated token and certificate live (`token`, `tls-cert.pem`,
    /// `tls-key.pem`); made 0700 when missing.
    pub state_dir: PathBuf,
}

/// What the TLS listener needs, and what the app prints at start.
pub struct TlsMaterial {
    /// Wraps each accepted TCP connection (ALPN `http/1.1`).
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// SHA-256 of the leaf certificate's DER, uppercase hex pairs joined by `:`,
    /// for the user to give Collie.
    pub fingerprint: String,
    /// The certificate file in use.
    pub cert_path: PathBuf,
    /// The bearer token every request must carry.
    pub token: Token,
    /// The token file in use (to tell the user where to read it).
    pub token_path: PathBuf,
    /// Whether the certificate is the generated self-signed one.
    pub self_signed: bool,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("fingerprint", &self.fingerprint)
            .field("cert_path", &self.cert_path)
            .field("token", &self.token)
            .field("token_path", &self.token_path)
            .field("self_signed", &self.self_signed)
            .finish_non_exhaustive()
    }
}

/// Why the TLS transport cannot start. Its message names the file and says what
/// to do next; it never holds the token.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);

/// Prepares the TLS transport: the state folder, the token and the certificate,
/// and the acceptor built on them.
pub fn prepare(settings: &TlsSettings) -> Result<TlsMaterial, TlsError> {
    make_private_dir(&settings.state_dir)?;
    let (token, token_path) = match &settings.token_file {
        Some(path) => (Token::load(path)?, path.clone()),
        None => {
            let path = settings.state_dir.join(TOKEN_FILE);
            (Token::load_or_create(&path)?, path)
        }
    };
    let (certs, key, cert_path, self_signed) = match (&settings.cert, &settings.key) {
        (Some(cert), Some(key)) => (load_certs(cert)?, load_key(key)?, cert.clone(), false),
        (None, None) => {
            let (certs, key) = self_signed_pair(&settings.state_dir, settings.listen.ip())?;
            (certs, key, settings.state_dir.join(CERT_FILE), true)
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(TlsError(
                "the durable facet's TLS config names a certificate or a key but not both: \
                 give both `cert` and `key`, or neither to use a self-signed certificate"
                    .to_owned(),
            ));
        }
    };
    let fingerprint = certs.first().map(fingerprint).unwrap_or_default();
    let config = server_config(certs, key, &cert_path)?;
    Ok(TlsMaterial {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        fingerprint,
        cert_path,
        token,
        token_path,
        self_signed,
    })
}

/// SHA-256 of a certificate's DER as uppercase hex pairs joined by `:`.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = Sha256::digest(cert.as_ref());
    let pairs: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    pairs.join(":")
}

/// The rustls server config: the ring provider, safe default versions, no
/// client certificates, ALPN `http/1.1`.
fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    cert_path: &Path,
) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("cannot set up TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            TlsError(format!(
                "cannot use the certificate {} with its key: {e}; check that the key is the \
                 certificate's (for the self-signed one, remove both files to make a new pair)",
                cert_path.display()
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Makes the state folder 0700 if missing (an existing one is left as it is:
/// the secrets in it are 0600 each).
fn make_private_dir(dir: &Path) -> Result<(), TlsError> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(TlsError(format!(
            "{} is not a folder: the durable facet keeps its token and certificate there; \
             move the file away or set another state folder",
            dir.display()
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| TlsError(format!("cannot make the folder {}: {e}", dir.display()))),
        Err(e) => Err(TlsError(format!("cannot read {}: {e}", dir.display()))),
    }
}

/// Opens a file that must be a regular file with no group or other permission
/// bits (checked on the opened file, not the path), and reads it up to `limit`
/// bytes (one more is read to notice a longer file).
fn read_private(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>, TlsError> {
    let shown = path.display();
    // Checked before opening too: opening a FIFO would block.
    if fs::metadata(path).is_ok_and(|meta| !meta.is_file()) {
        return Err(TlsError(format!(
            "the {what} {shown} is not a regular file"
        )));
    }
    let file = fs::File::open(path).map_err(|e| {
        TlsError(if e.kind() == ErrorKind::NotFound {
            format!("the {what} {shown} does not exist")
        } else {
            format!("cannot read the {what} {shown}: {e}")
        })
    })?;
    let meta = file
        .metadata()
        .map_err(|e| TlsError(format!("cannot read the {what} {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(TlsError(format!(
            "the {what} {shown} is not a regular file"
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(TlsError(format!(
            "the {what} {shown} has mode {mode:04o}: its group or others have rights on it; \
             make it private with `chmod 600 {shown}`"
        )));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| TlsError(format!("cannot read the {what} {shown}: {e}")))?;
    Ok(bytes)
}

/// Reads a PEM certificate chain, leaf first.
fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let shown = path.display();
    let pem = fs::read(path).map_err(|e| {
        TlsError(format!(
            "cannot read the TLS certificate {shown}: {e}; give a PEM certificate file"
        ))
    })?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            TlsError(format!(
                "the TLS certificate {shown} is not valid PEM ({e}): give a PEM certificate file"
            ))
        })?;
    if certs.is_empty() {
        return Err(TlsError(format!(
            "the TLS certificate {shown} holds no CERTIFICATE block: give a PEM certificate file"
        )));
    }
    Ok(certs)
}

/// Reads a PEM private key (PKCS#8, PKCS#1 or SEC1), private to the user.
fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let shown = path.display();
    let pem = read_private(path, "TLS key", 1 << 20)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        TlsError(format!(
            "the TLS key {shown} holds no usable PEM private key ({e}): give the \
             certificate's key as a PEM file"
        ))
    })
}

/// The names of a self-signed certificate for `listen`: `localhost`,
/// `127.0.0.1`, and the listen IP when it is another specific address.
fn san_names(listen: IpAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if !listen.is_unspecified() && listen != IpAddr::V4(Ipv4Addr::LOCALHOST) {
        names.push(listen.to_string());
    }
    names
}

/// Whether `cert` names every name [`san_names`] wants.
fn covers(cert: &CertificateDer<'_>, listen: IpAddr) -> bool {
    let Ok(parsed) = rustls::server::ParsedCertificate::try_from(cert) else {
        return false;
    };
    san_names(listen).into_iter().all(|name| {
        ServerName::try_from(name)
            .map(|name| rustls::client::verify_server_name(&parsed, &name).is_ok())
            .unwrap_or(false)
    })
}

/// The self-signed pair of the state folder: reused when both files are there
/// and the certificate still names the listen address, made anew otherwise.
fn self_signed_pair(
    dir: &Path,
    listen: IpAddr,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let cert_path = dir.join(CERT_FILE);
    let key_path = dir.join(KEY_FILE);
    match (cert_path.exists(), key_path.exists()) {
        (true, true) => {
            let certs = load_certs(&cert_path)?;
            let key = load_key(&key_path)?;
            if certs.first().is_some_and(|leaf| covers(leaf, listen)) {
                return Ok((certs, key));
            }
            tracing::warn!(
                cert = %cert_path.display(),
                "the self-signed certificate does not name {listen}: making a new one \
                 (its fingerprint changes: give Collie the new one)"
            );
        }
        (false, false) => {}
        _ => tracing::warn!(
            dir = %dir.display(),
            "only one of {CERT_FILE} and {KEY_FILE} is there: making a new self-signed pair"
        ),
    }
    generate_pair(&cert_path, &key_path, listen)
}

/// Makes and saves a self-signed certificate and its key (ECDSA P-256).
fn generate_pair(
    cert_path: &Path,
    key_path: &Path,
    listen: IpAddr,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let failed = |e: rcgen::Error| TlsError(format!("cannot make a self-signed certificate: {e}"));
    let mut params = rcgen::CertificateParams::new(san_names(listen)).map_err(failed)?;
    let mut name = rcgen::DistinguishedName::new();
    name.push(rcgen::DnType::CommonName, "krad durable agent");
    params.distinguished_name = name;
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = rcgen::KeyPair::generate().map_err(failed)?;
    let cert = params.self_signed(&key).map_err(failed)?;
    // The key first: a certificate without its key is never left alone.
    write_atomic(key_path, key.serialize_pem().as_bytes(), 0o600)?;
    write_atomic(cert_path, cert.pem().as_bytes(), 0o644)?;
    let der = PrivateKeyDer::Pkcs8(key.serialize_der().into());
    Ok((vec![cert.der().clone()], der))
}

/// Writes a file through a temporary one renamed over it, with `mode`.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    let shown = path.display();
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        TlsError(format!("cannot write {shown}: {e}"))
    })
}

/// The bearer token of the TLS transport. Only its SHA-256 digest is kept, and
/// `Debug` never shows it.
#[derive(Clone)]
pub struct Token {
    digest: [u8; 32],
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

/// Why a token's bytes are not a token, without quoting them.
fn token_rule_broken(secret: &[u8]) -> Option<String> {
    if secret.len() < MIN_TOKEN_LEN {
        return Some(format!(
            "is {} bytes long, at least {MIN_TOKEN_LEN} are needed",
            secret.len()
        ));
    }
    if secret.len() > MAX_TOKEN_LEN {
        return Some(format!("is longer than {MAX_TOKEN_LEN} bytes"));
    }
    if let Some(at) = secret.iter().position(|b| !(0x21..=0x7e).contains(b)) {
        return Some(format!(
            "has a space, a control character or a non-ASCII byte (at byte {}): only printable \
             ASCII without spaces is allowed",
            at + 1
        ));
    }
    None
}

impl Token {
    /// A token from its text, if it keeps the seed's rules (at least 32 bytes of
    /// printable ASCII, no spaces).
    pub fn parse(secret: &[u8]) -> Result<Token, TlsError> {
        match token_rule_broken(secret) {
            Some(why) => Err(TlsError(format!("the token {why}"))),
            None => Ok(Token::digest_of(secret)),
        }
    }

    fn digest_of(secret: &[u8]) -> Token {
        Token {
            digest: Sha256::digest(secret).into(),
        }
    }

    /// Reads a token file: a regular file with no group or other permission
    /// bits, holding the token and at most one trailing newline.
    pub fn load(path: &Path) -> Result<Token, TlsError> {
        let shown = path.display();
        let hint = "write a token of 32 or more printable ASCII characters without spaces in it \
                    (e.g. `openssl rand -hex 32`), or leave the token file out of the config to \
                    let krad make one";
        let mut bytes =
            read_private(path, "token file", MAX_TOKEN_LEN as u64 + 2).map_err(|e| {
                if e.0.ends_with("does not exist") {
                    TlsError(format!("{}: {hint}", e.0))
                } else {
                    e
                }
            })?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        match token_rule_broken(&bytes) {
            Some(why) => Err(TlsError(format!("the token in {shown} {why}: {hint}"))),
            None => Ok(Token::digest_of(&bytes)),
        }
    }

    /// Loads the token file at `path`, or makes it (0600, 64 hex characters of
    /// 32 random bytes from the OS) when it does not exist, with its folder
    /// (0700) if needed.
    pub fn load_or_create(path: &Path) -> Result<Token, TlsError> {
        let shown = path.display();
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            _ => return Token::load(path),
        }
        if let Some(parent) = path.parent() {
            make_private_dir(parent)?;
        }
        let mut raw = [0u8; 32];
        rand::rngs::SysRng.try_fill_bytes(&mut raw).map_err(|e| {
            TlsError(format!(
                "cannot make a token: the OS random generator failed: {e}"
            ))
        })?;
        let secret = hex::encode(raw);
        let mut file = match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(file) => file,
            // Made meanwhile (another start): use that one.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => return Token::load(path),
            Err(e) => return Err(TlsError(format!("cannot make the token file {shown}: {e}"))),
        };
        let written = file
            .set_permissions(fs::Permissions::from_mode(0o600))
            .and_then(|()| file.write_all(format!("{secret}\n").as_bytes()))
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(path);
            return Err(TlsError(format!(
                "cannot write the token file {shown}: {e}"
            )));
        }
        Ok(Token::digest_of(secret.as_bytes()))
    }

    /// Whether an `Authorization` header value is exactly `Bearer <token>`,
    /// compared in constant time over SHA-256 digests (so neither the token's
    /// bytes nor its length leak). No header, another scheme or other case
    /// (`bearer`) is false.
    pub fn matches_header(&self, authorization: Option<&[u8]>) -> bool {
        let Some(presented) = authorization.and_then(|value| value.strip_prefix(b"Bearer ")) else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(presented).into();
        bool::from(digest.ct_eq(&self.digest))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const GOOD: &str = "0123456789abcdef0123456789abcdef";

    fn write_mode(path: &Path, bytes: &[u8], mode: u32) {
        let _ = fs::remove_file(path);
        fs::write(path, bytes).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn settings(dir: &Path) -> TlsSettings {
        TlsSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            token_file: None,
            cert: None,
            key: None,
            state_dir: dir.join("state"),
        }
    }

    #[test]
    fn token_files_follow_the_rules() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");

        write_mode(&path, format!("{GOOD}\n").as_bytes(), 0o600);
        let token = Token::load(&path).unwrap();
        assert_eq!(format!("{token:?}"), "Token(…)");
        write_mode(&path, GOOD.as_bytes(), 0o400);
        assert!(Token::load(&path).is_ok());

        let refused = |bytes: &[u8], mode: u32, says: &str| {
            write_mode(&path, bytes, mode);
            let error = Token::load(&path).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
            assert!(!error.contains("0123456789abcdef"), "{error}");
        };
        refused(&GOOD.as_bytes()[1..], 0o600, "31 bytes long, at least 32");
        refused(format!("{GOOD} x").as_bytes(), 0o600, "a space");
        refused(format!("{GOOD}é").as_bytes(), 0o600, "non-ASCII");
        refused(format!("{GOOD}\n\n").as_bytes(), 0o600, "control character");
        refused(format!("{GOOD}\t").as_bytes(), 0o600, "control character");
        refused(GOOD.as_bytes(), 0o640, "chmod 600");
        refused(GOOD.as_bytes(), 0o604, "chmod 600");
        refused(&[b'x'; MAX_TOKEN_LEN + 1], 0o600, "longer than");

        let error = Token::load(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not exist"), "{error}");
        let error = Token::load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not a regular file"), "{error}");

        assert!(Token::parse(GOOD.as_bytes()).is_ok());
        assert!(Token::parse(b"short").is_err());
    }

    #[test]
    fn tokens_match_only_the_exact_bearer_header() {
        let token = Token::parse(GOOD.as_bytes()).unwrap();
        assert!(token.matches_header(Some(format!("Bearer {GOOD}").as_bytes())));
        assert!(!token.matches_header(None));
        assert!(!token.matches_header(Some(&b""[..])));
        assert!(!token.matches_header(Some(GOOD.as_bytes())));
        assert!(!token.matches_header(Some(format!("bearer {GOOD}").as_bytes())));
        assert!(!token.matches_header(Some(format!("Basic {GOOD}").as_bytes())));
        assert!(!token.matches_header(Some(format!("Bearer  {GOOD}").as_bytes())));
        assert!(!token.matches_header(Some(format!("Bearer {GOOD}x").as_bytes())));
        assert!(!token.matches_header(Some(format!("Bearer {}", &GOOD[1..]).as_bytes())));
        assert!(!token.matches_header(Some(&b"Bearer \xff\xfe"[..])));
        let other = "1123456789abcdef0123456789abcdef";
        assert!(!token.matches_header(Some(format!("Bearer {other}").as_bytes())));
    }

    #[test]
    fn a_missing_token_is_made_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/token");
        let first = Token::load_or_create(&path).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            fs::metadata(dir.path().join("new")).unwrap().mode() & 0o777,
            0o700
        );
        let text = fs::read_to_string(&path).unwrap();
        let secret = text.strip_suffix('\n').unwrap();
        assert!(secret.len() >= 43, "{secret}");
        assert!(first.matches_header(Some(format!("Bearer {secret}").as_bytes())));
        let again = Token::load_or_create(&path).unwrap();
        assert!(again.matches_header(Some(format!("Bearer {secret}").as_bytes())));
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn the_self_signed_certificate_is_made_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(dir.path());
        let first = prepare(&settings).unwrap();
        assert!(first.self_signed);
        let state = &settings.state_dir;
        assert_eq!(fs::metadata(state).unwrap().mode() & 0o777, 0o700);
        assert_eq!(first.cert_path, state.join(CERT_FILE));
        assert_eq!(first.token_path, state.join(TOKEN_FILE));
        let key_mode = fs::metadata(state.join(KEY_FILE)).unwrap().mode() & 0o777;
        assert_eq!(key_mode, 0o600);
        assert_eq!(first.fingerprint.len(), 32 * 3 - 1);
        assert!(first.fingerprint.split(':').all(|pair| {
            pair.len() == 2
                && pair
                    .chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        }));

        let second = prepare(&settings).unwrap();
        assert_eq!(second.fingerprint, first.fingerprint);

        // Another listen address the certificate does not name: a new one.
        let mut elsewhere = settings.clone();
        elsewhere.listen = "10.20.30.40:8443".parse().unwrap();
        let third = prepare(&elsewhere).unwrap();
        assert_ne!(third.fingerprint, first.fingerprint);
        let pem = fs::read(state.join(CERT_FILE)).unwrap();
        let leaf = CertificateDer::from_pem_slice(&pem).unwrap();
        assert!(covers(&leaf, "10.20.30.40".parse().unwrap()));
        // ...which still serves loopback without changing again.
        assert_eq!(prepare(&settings).unwrap().fingerprint, third.fingerprint);
    }

    #[test]
    fn configured_certificates_and_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let made = settings(dir.path());
        let generated = prepare(&made).unwrap();

        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        fs::copy(made.state_dir.join(CERT_FILE), &cert).unwrap();
        let key_pem = fs::read(made.state_dir.join(KEY_FILE)).unwrap();
        write_mode(&key, &key_pem, 0o600);
        let token = dir.path().join("my-token");
        write_mode(&token, GOOD.as_bytes(), 0o600);

        let mut configured = settings(dir.path());
        configured.state_dir = dir.path().join("other-state");
        configured.cert = Some(cert.clone());
        configured.key = Some(key.clone());
        configured.token_file = Some(token.clone());
        let material = prepare(&configured).unwrap();
        assert!(!material.self_signed);
        assert_eq!(material.fingerprint, generated.fingerprint);
        assert_eq!(material.cert_path, cert);
        assert_eq!(material.token_path, token);
        assert!(
            material
                .token
                .matches_header(Some(format!("Bearer {GOOD}").as_bytes()))
        );
        assert!(!configured.state_dir.join(TOKEN_FILE).exists());

        fs::set_permissions(&key, fs::Permissions::from_mode(0o640)).unwrap();
        let error = prepare(&configured).err().unwrap().to_string();
        assert!(error.contains("chmod 600"), "{error}");
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();

        let mut half = configured;
        half.key = None;
        let error = prepare(&half).err().unwrap().to_string();
        assert!(error.contains("both"), "{error}");

        let mut garbage = settings(dir.path());
        let bad = dir.path().join("bad.pem");
        fs::write(&bad, b"not a certificate").unwrap();
        garbage.cert = Some(bad);
        garbage.key = Some(key);
        let error = prepare(&garbage).err().unwrap().to_string();
        assert!(error.contains("no CERTIFICATE"), "{error}");
    }

    #[tokio::test]
    async fn a_client_that_trusts_the_certificate_exchanges_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(dir.path());
        let material = prepare(&settings).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = material.acceptor.clone();
        let server = tokio::spawn(async move {
            for _ in 0..2 {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = acceptor.accept(tcp).await.unwrap();
                assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
                let mut hello = [0u8; 5];
                tls.read_exact(&mut hello).await.unwrap();
                assert_eq!(&hello, b"hello");
                tls.write_all(b"world").await.unwrap();
                tls.shutdown().await.unwrap();
            }
        });

        let pem = fs::read(&material.cert_path).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(&pem).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        for name in ["localhost", "127.0.0.1"] {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let server_name = ServerName::try_from(name).unwrap();
            let mut tls = connector.connect(server_name, tcp).await.unwrap();
            tls.write_all(b"hello").await.unwrap();
            let mut answer = Vec::new();
            tls.read_to_end(&mut answer).await.unwrap();
            assert_eq!(answer, b"world");
        }
        server.await.unwrap();

        // A client that does not trust it fails the handshake.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = material.acceptor.clone();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            acceptor.accept(tcp).await.is_err()
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        assert!(connector.connect(name, tcp).await.is_err());
        assert!(server.await.unwrap());
    }
}
