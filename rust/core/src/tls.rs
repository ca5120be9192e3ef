//! The TLS material of a connection: a CA, a client certificate and its key, each a
//! file or PEM text (`*_content`, for Spark executors and containers where no file is
//! laid out). Files alone go to async-nats as paths; with any text, the client's
//! TLS config is built here the way async-nats builds it from files (the given CA
//! alone, else the system's roots). Errors name the option and never quote its text.

use std::path::{Path, PathBuf};

use async_nats::rustls::pki_types::pem::PemObject;
use async_nats::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use async_nats::rustls::{ClientConfig, RootCertStore};

use crate::error::{Error, Result};

/// The TLS options of a connection, files and texts, as `ConnectConfig` holds them.
pub(crate) struct TlsOptions<'a> {
    pub ca: &'a Option<PathBuf>,
    pub cert: &'a Option<PathBuf>,
    pub key: &'a Option<PathBuf>,
    pub ca_content: &'a Option<String>,
    pub cert_content: &'a Option<String>,
    pub key_content: &'a Option<String>,
}

/// One piece of TLS material and the option that gave it.
enum Pem<'a> {
    File(&'static str, &'a Path),
    Content(&'static str, &'a str),
}

impl Pem<'_> {
    fn option(&self) -> &'static str {
        match self {
            Pem::File(option, _) | Pem::Content(option, _) => option,
        }
    }

    fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            Pem::File(option, path) => std::fs::read(path).map_err(|e| {
                Error::bad_option(
                    option,
                    format!("option '{option}': cannot read {}: {e}", path.display()),
                )
            }),
            Pem::Content(_, text) => Ok(text.as_bytes().to_vec()),
        }
    }

    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>> {
        let option = self.option();
        let certs = CertificateDer::pem_slice_iter(&self.bytes()?)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| {
                Error::bad_option(
                    option,
                    format!(
                        "option '{option}': not PEM certificates (-----BEGIN CERTIFICATE----- ...)"
                    ),
                )
            })?;
        if certs.is_empty() {
            return Err(Error::bad_option(
                option,
                format!("option '{option}': holds no PEM certificate"),
            ));
        }
        Ok(certs)
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>> {
        let option = self.option();
        PrivateKeyDer::from_pem_slice(&self.bytes()?).map_err(|_| {
            Error::bad_option(
                option,
                format!("option '{option}': holds no PEM private key (PKCS#8, PKCS#1 or SEC1)"),
            )
        })
    }
}

/// The CA, certificate and key a connection was given, from either kind of option.
pub(crate) struct TlsMaterial<'a> {
    ca: Option<Pem<'a>>,
    cert: Option<Pem<'a>>,
    key: Option<Pem<'a>>,
}

/// A file option and its text twin: one of them at most.
pub(crate) fn one_of<F, C>(file: (&str, &Option<F>), content: (&str, &Option<C>)) -> Result<()> {
    if file.1.is_some() && content.1.is_some() {
        return Err(Error::bad_options(
            &[file.0, content.0],
            format!(
                "options '{}' and '{}' exclude each other: give the file or its content",
                file.0, content.0
            ),
        ));
    }
    Ok(())
}

impl TlsOptions<'_> {
    /// What can be said without reading a file: each file or its text, and a
    /// certificate with its key.
    pub(crate) fn check(&self) -> Result<()> {
        one_of(("tls_ca", self.ca), ("tls_ca_content", self.ca_content))?;
        one_of(
            ("tls_cert", self.cert),
            ("tls_cert_content", self.cert_content),
        )?;
        one_of(("tls_key", self.key), ("tls_key_content", self.key_content))?;
        let has_cert = self.cert.is_some() || self.cert_content.is_some();
        let has_key = self.key.is_some() || self.key_content.is_some();
        if has_cert != has_key {
            return Err(Error::bad_options(
                &["tls_cert", "tls_key", "tls_cert_content", "tls_key_content"],
                "options 'tls_cert' and 'tls_key' (or 'tls_cert_content' and \
                 'tls_key_content') go together: give both or neither",
            ));
        }
        Ok(())
    }
}

/// The piece of material a checked pair gives: the file (which must be readable),
/// its text, or nothing.
fn either<'a>(
    file: (&'static str, &'a Option<PathBuf>),
    content: (&'static str, &'a Option<String>),
) -> Result<Option<Pem<'a>>> {
    match (file.1, content.1) {
        (Some(path), _) => {
            // A file that cannot be read would otherwise leave TLS off without a
            // word, and the connection in plain text.
            std::fs::metadata(path).map_err(|e| {
                Error::bad_option(
                    file.0,
                    format!("option '{}': cannot read {}: {e}", file.0, path.display()),
                )
            })?;
            Ok(Some(Pem::File(file.0, path)))
        }
        (None, Some(text)) => Ok(Some(Pem::Content(content.0, text))),
        (None, None) => Ok(None),
    }
}

impl<'a> TlsMaterial<'a> {
    pub(crate) fn of(options: TlsOptions<'a>) -> Result<Self> {
        options.check()?;
        Ok(Self {
            ca: either(
                ("tls_ca", options.ca),
                ("tls_ca_content", options.ca_content),
            )?,
            cert: either(
                ("tls_cert", options.cert),
                ("tls_cert_content", options.cert_content),
            )?,
            key: either(
                ("tls_key", options.key),
                ("tls_key_content", options.key_content),
            )?,
        })
    }

    /// Whether any piece is text: then the config is built here.
    pub(crate) fn has_content(&self) -> bool {
        [&self.ca, &self.cert, &self.key]
            .iter()
            .any(|pem| matches!(pem, Some(Pem::Content(..))))
    }

    /// A CA or a client certificate asks for TLS, as in nats.go.
    pub(crate) fn asks_for_tls(&self) -> bool {
        self.ca.is_some() || self.cert.is_some()
    }

    pub(crate) fn client_config(&self) -> Result<ClientConfig> {
        let mut roots = RootCertStore::empty();
        match &self.ca {
            Some(ca) => {
                for cert in ca.certificates()? {
                    roots.add(cert).map_err(|e| {
                        Error::bad_input(format!(
                            "option '{}': a certificate is not a CA to trust: {e}",
                            ca.option()
                        ))
                    })?;
                }
            }
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        let builder = ClientConfig::builder().with_root_certificates(roots);
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(cert.certificates()?, key.private_key()?)
                .map_err(|e| {
                    Error::bad_input(format!(
                        "options '{}' and '{}': the certificate and key do not go together: {e}",
                        cert.option(),
                        key.option()
                    ))
                }),
            _ => Ok(builder.with_no_client_auth()),
        }
    }
}
