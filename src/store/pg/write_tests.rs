//! Unit tests of the server's write transaction and the helpers beside it.

use super::*;

#[test]
fn a_bytea_in_text_form_is_decoded_or_refused() {
    assert_eq!(unhex("\\x00ff10"), Some(vec![0, 255, 16]));
    assert_eq!(unhex("\\x"), Some(vec![]));
    assert_eq!(unhex("\\x0"), None);
    assert_eq!(unhex("\\xzz"), None);
    assert_eq!(unhex("00ff"), None);
}

#[test]
fn a_url_is_masked_and_named_without_its_password() {
    assert_eq!(
        mask_url("postgres://bob:s3cret@db.example:5433/uwf?sslmode=require"),
        "postgres://bob@db.example:5433/uwf?sslmode=require"
    );
    assert_eq!(mask_url("postgresql://db/uwf"), "postgresql://db/uwf");
    let env = |_: &str| None;
    let c = config_of("postgres://bob:s3cret@db.example:5433/uwf", &env).unwrap();
    assert_eq!(server_name(&c), "postgres://bob@db.example:5433/uwf");
    assert!(!server_name(&c).contains("s3cret"));
}

#[test]
fn libpq_variables_fill_what_the_url_leaves_out() {
    let env = |k: &str| match k {
        "PGHOST" => Some("10.1.2.3".to_string()),
        "PGPORT" => Some("6543".to_string()),
        "PGUSER" => Some("carol".to_string()),
        "PGPASSWORD" => Some("pw".to_string()),
        "PGDATABASE" => Some("flows".to_string()),
        _ => None,
    };
    let c = config_of("postgres://", &env).unwrap();
    assert_eq!(server_name(&c), "postgres://carol@10.1.2.3:6543/flows");
    assert_eq!(c.get_password(), Some(&b"pw"[..]));
    let c = config_of("postgres://dave@h/x", &env).unwrap();
    assert_eq!(server_name(&c), "postgres://dave@h:6543/x");
    // A port in the URL wins.
    let c = config_of("postgres://dave:pw@h:7000/x", &env).unwrap();
    assert_eq!(server_name(&c), "postgres://dave@h:7000/x");
    assert_eq!(c.get_password(), Some(&b"pw"[..]));
}

#[test]
fn stored_keys_keep_id_order() {
    let ids = [0u64, 1, 1 << 62, (1 << 63) - 1, 1 << 63, u64::MAX];
    for w in ids.windows(2) {
        assert!(key(NodeId(w[0])) < key(NodeId(w[1])));
        assert_eq!(unkey(key(NodeId(w[0]))), NodeId(w[0]));
    }
}
