//! A client assertion (RFC 7523): a short-lived JWT naming the client, signed with its
//! private key, for the `private_key_jwt` authentication of the client-credentials
//! grant. Signed with ring (already built for rustls) rather than a JWT crate, whose
//! crypto backend would add a C build for three algorithms.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};
use std::time::{SystemTime, UNIX_EPOCH};

/// How long the assertion is valid: long enough for one token request.
const LIFETIME_SECS: u64 = 300;

/// The compact JWS: `iss` and `sub` the client, `aud` the authorization server's
/// issuer. ECDSA signatures are the fixed-width `R‖S` JOSE asks for, not DER.
pub(super) fn sign(
    pem: &str,
    algorithm: &str,
    client_id: &str,
    audience: &str,
) -> Result<String, String> {
    let der = pem_body(pem)?;
    let rng = SystemRandom::new();
    let mut jti = [0u8; 16];
    rng.fill(&mut jti)
        .map_err(|_| "no random numbers for the client assertion".to_string())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let header = serde_json::json!({ "alg": algorithm, "typ": "JWT" });
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + LIFETIME_SECS,
        "jti": hex::encode(jti),
    });
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let refused = |e: ring::error::KeyRejected| {
        format!("the private key is not a PKCS#8 key for {algorithm} ({e})")
    };
    let failed = |_| format!("signing the client assertion with {algorithm} failed");
    let signature = match algorithm {
        "ES256" | "ES384" => {
            let alg = if algorithm == "ES256" {
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING
            } else {
                &signature::ECDSA_P384_SHA384_FIXED_SIGNING
            };
            let key = EcdsaKeyPair::from_pkcs8(alg, &der, &rng).map_err(refused)?;
            key.sign(&rng, input.as_bytes())
                .map_err(failed)?
                .as_ref()
                .to_vec()
        }
        "RS256" => {
            let key = RsaKeyPair::from_pkcs8(&der).map_err(refused)?;
            let mut signature = vec![0; key.public().modulus_len()];
            key.sign(
                &signature::RSA_PKCS1_SHA256,
                &rng,
                input.as_bytes(),
                &mut signature,
            )
            .map_err(failed)?;
            signature
        }
        other => return Err(format!("unknown signing algorithm `{other}`")),
    };
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// The DER inside an unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
fn pem_body(pem: &str) -> Result<Vec<u8>, String> {
    if !pem.contains("-----BEGIN PRIVATE KEY-----") {
        return Err(
            "the private key is not an unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`)"
                .to_string(),
        );
    }
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("-----"))
        .collect();
    STANDARD
        .decode(body)
        .map_err(|_| "the private key's PEM body is not base64".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem(der: &[u8]) -> String {
        let body = STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
            lines.join("\n")
        )
    }

    #[test]
    fn an_es256_assertion_verifies_with_the_public_key_and_names_the_client() {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let doc = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(alg, doc.as_ref(), &rng).unwrap();
        let jwt = sign(&pem(doc.as_ref()), "ES256", "client-7", "http://as.test").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        assert_eq!(signature.len(), 64, "R‖S, not DER");
        signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            ring::signature::KeyPair::public_key(&key).as_ref(),
        )
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
        .expect("the signature verifies");
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header, serde_json::json!({ "alg": "ES256", "typ": "JWT" }));
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-7");
        assert_eq!(claims["sub"], "client-7");
        assert_eq!(claims["aud"], "http://as.test");
        assert_eq!(
            claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
            LIFETIME_SECS
        );
    }

    #[test]
    fn a_key_of_another_kind_is_refused_by_name() {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap();
        assert_eq!(
            sign(&pem(doc.as_ref()), "RS256", "c", "a").unwrap_err(),
            "the private key is not a PKCS#8 key for RS256 (WrongAlgorithm)"
        );
        assert_eq!(
            sign("ssh-ed25519 AAAA", "ES256", "c", "a").unwrap_err(),
            "the private key is not an unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`)"
        );
    }
}
