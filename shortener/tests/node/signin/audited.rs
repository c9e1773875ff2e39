//! What sign-in adds to the audit log beyond the changes a caller makes: a change of the roles
//! file, recorded by the node that reloads it, per tenant it touched.

use super::issuer::{Key, TestIssuer};
use super::{ROLES, configure, marketing_audit, marketing_keys};
use crate::helpers::{Backend, Node, Stack};
use serde_json::{Value, json};
use std::time::Duration;

/// Marketing's `role_mapping.change` entries, waiting up to ten seconds for `count` of them.
async fn role_changes(node: &Node, key: &str, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<Value> = marketing_audit(node, key)
            .await
            .into_iter()
            .filter(|e| e["action"] == "role_mapping.change")
            .collect();
        if found.len() >= count || tokio::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_the_roles_file_is_audited_per_tenant() {
    let stack = Stack::new(Backend::Sqlite).await;
    let key = marketing_keys(&stack.dir.path().join("keys.toml"));
    let signer = Key::new("k1");
    let issuer = TestIssuer::start(&[&signer]).await;
    let mut config = stack.config("a");
    configure(&mut config, stack.dir.path(), &issuer.issuer);
    let roles = config.access.roles_file.clone().expect("a roles file");
    let node = Node::start(config).await;
    assert!(role_changes(&node, &key, 0).await.is_empty());

    // Editors become admins of marketing, viewers lose it; sales is untouched.
    let changed = ROLES
        .replace(
            "value = \"link-editors\"\ntenant = \"marketing\"\nrole = \"editor\"",
            "value = \"link-editors\"\ntenant = \"marketing\"\nrole = \"admin\"",
        )
        .replace(
            "value = \"link-viewers\"\ntenant = \"marketing\"\nrole = \"viewer\"",
            "value = \"link-viewers\"\ntenant = \"sales\"\nrole = \"viewer\"",
        );
    assert_ne!(changed, ROLES);
    std::fs::write(&roles, &changed).expect("write roles");
    let entries = role_changes(&node, &key, 1).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["tenant"], "marketing", "{entry}");
    assert_eq!(
        entry["object"],
        json!({"kind": "role_mapping", "id": "marketing"})
    );
    assert_eq!(entry["actor"]["key"], "roles-file", "{entry}");
    assert!(entry["actor"]["subject"].is_null(), "{entry}");
    assert!(entry["actor"]["email"].is_null(), "{entry}");
    assert!(entry["address"].is_null(), "{entry}");
    let table = |value: &str, role: &str| json!({"claim": "groups", "value": value, "role": role});
    assert_eq!(
        entry["change"]["added"],
        json!([table("link-editors", "admin")])
    );
    assert_eq!(
        entry["change"]["removed"],
        json!([
            table("link-editors", "editor"),
            table("link-viewers", "viewer")
        ])
    );
    assert!(
        entry["change"]["node"]
            .as_str()
            .is_some_and(|n| !n.is_empty()),
        "{entry}"
    );

    // The same tables in another order change nothing, and record nothing.
    let reordered: Vec<&str> = changed.split("[[role]]").collect();
    let mut tables = reordered[1..].to_vec();
    tables.reverse();
    std::fs::write(&roles, format!("[[role]]{}", tables.join("[[role]]"))).expect("write");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(role_changes(&node, &key, 2).await.len(), 1);
    node.stop().await;
}
