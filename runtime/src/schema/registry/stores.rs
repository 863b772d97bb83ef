//! The registry client's trust and key stores (`schema.registry.ssl.*`),
//! as Kafka's clients take them: PEM files, Java KeyStores (JKS) or
//! PKCS12, each read into PEM for the HTTP client. A store that cannot be
//! read, a wrong password and a store without what it must hold each say
//! so, naming the file.

use base64::Engine as _;

/// `...truststore.type` / `...keystore.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Jks,
    Pkcs12,
}

impl StoreType {
    /// Kafka's names, any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PEM" => Some(StoreType::Pem),
            "JKS" => Some(StoreType::Jks),
            "PKCS12" | "P12" => Some(StoreType::Pkcs12),
            _ => None,
        }
    }
}

/// A trust store or key store: its file, type and passwords.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub location: String,
    pub store_type: StoreType,
    /// `...truststore.password` / `...keystore.password` (JKS and PKCS12).
    pub password: Option<String>,
    /// `...key.password`: a JKS key's own password, if not the store's.
    pub key_password: Option<String>,
}

fn pem_block(out: &mut Vec<u8>, label: &str, der: &[u8]) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    out.extend_from_slice(format!("-----BEGIN {label}-----\n").as_bytes());
    for line in b64.as_bytes().chunks(64) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.extend_from_slice(format!("-----END {label}-----\n").as_bytes());
}

impl Store {
    fn read(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.location).map_err(|e| format!("cannot read `{}`: {e}", self.location))
    }

    fn password(&self) -> Result<&str, String> {
        self.password.as_deref().ok_or_else(|| {
            format!(
                "`{}` is a {:?} store, which needs its password",
                self.location, self.store_type
            )
        })
    }

    fn jks(&self) -> Result<jks::KeyStore, String> {
        let bytes = self.read()?;
        let mut store = jks::KeyStore::new();
        store
            .load(bytes.as_slice(), self.password()?.as_bytes())
            .map_err(|e| {
                format!(
                    "`{}` is not a JKS store this password opens: {e}",
                    self.location
                )
            })?;
        Ok(store)
    }

    fn pkcs12(&self) -> Result<p12_keystore::Pkcs12Archive, String> {
        let bytes = self.read()?;
        p12_keystore::Pkcs12Archive::from_pkcs12(&bytes, self.password()?).map_err(|e| {
            format!(
                "`{}` is not a PKCS12 store this password opens: {e}",
                self.location
            )
        })
    }

    /// The trusted certificates, as PEM.
    pub fn trusted_pem(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        match self.store_type {
            StoreType::Pem => {
                out = self.read()?;
                if !out.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                    return Err(format!("`{}` holds no PEM certificate", self.location));
                }
                return Ok(out);
            }
            StoreType::Jks => {
                let store = self.jks()?;
                for alias in store.aliases() {
                    if let Ok(entry) = store.get_trusted_certificate_entry(&alias) {
                        pem_block(&mut out, "CERTIFICATE", &entry.certificate.content);
                    }
                }
            }
            StoreType::Pkcs12 => {
                for bag in self.pkcs12()?.certs {
                    pem_block(&mut out, "CERTIFICATE", bag.cert.as_der());
                }
            }
        }
        if out.is_empty() {
            return Err(format!("`{}` holds no trusted certificate", self.location));
        }
        Ok(out)
    }

    /// The client's certificate chain and its private key, as PEM.
    pub fn identity_pem(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        match self.store_type {
            StoreType::Pem => {
                out = self.read()?;
                let has = |marker: &[u8]| out.windows(marker.len()).any(|w| w == marker);
                if !has(b"-----BEGIN CERTIFICATE-----") || !has(b"PRIVATE KEY-----") {
                    return Err(format!(
                        "`{}` must hold the client's PEM certificate chain and its private key",
                        self.location
                    ));
                }
                if has(b"ENCRYPTED PRIVATE KEY") {
                    return Err(format!(
                        "`{}` holds an encrypted private key, which is not supported in PEM: give it unencrypted, or use a JKS or PKCS12 keystore",
                        self.location
                    ));
                }
                return Ok(out);
            }
            StoreType::Jks => {
                let store = self.jks()?;
                let alias = store
                    .aliases()
                    .into_iter()
                    .find(|a| store.is_private_key_entry(a))
                    .ok_or_else(|| format!("`{}` holds no private key", self.location))?;
                let password = self.key_password.as_deref().unwrap_or(self.password()?);
                let entry = store
                    .get_private_key_entry(&alias, password.as_bytes())
                    .map_err(|e| {
                        format!(
                            "the key `{alias}` of `{}` does not open with the key password (schema.registry.ssl.key.password, else the store's): {e}",
                            self.location
                        )
                    })?;
                for cert in &entry.certificate_chain {
                    pem_block(&mut out, "CERTIFICATE", &cert.content);
                }
                pem_block(&mut out, "PRIVATE KEY", &entry.private_key);
            }
            StoreType::Pkcs12 => {
                let archive = self.pkcs12()?;
                let key = archive
                    .keys
                    .first()
                    .ok_or_else(|| format!("`{}` holds no private key", self.location))?;
                // The key's own certificate first, then the rest of the chain.
                let own = |c: &p12_keystore::CertificateBag| {
                    key.local_key_id
                        .as_ref()
                        .is_some_and(|id| c.local_key_id.as_deref() == Some(id.0.as_slice()))
                };
                for bag in archive.certs.iter().filter(|c| own(c)) {
                    pem_block(&mut out, "CERTIFICATE", bag.cert.as_der());
                }
                for bag in archive.certs.iter().filter(|c| !own(c) && !c.trusted) {
                    pem_block(&mut out, "CERTIFICATE", bag.cert.as_der());
                }
                if out.is_empty() {
                    return Err(format!(
                        "`{}` holds a private key without its certificate",
                        self.location
                    ));
                }
                pem_block(&mut out, "PRIVATE KEY", key.key.as_der());
            }
        }
        Ok(out)
    }
}
