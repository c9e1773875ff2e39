//! The names of what an entry records: actions and the kinds of object they change.

macro_rules! names {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every value, in the order the API documents them.
            pub const ALL: &[$name] = &[$($name::$variant,)*];

            /// The name the API and the store use.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value named `name`.
            pub fn parse(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == name)
            }
        }
    };
}

names! {
    /// What was done.
    Action {
        /// A link was made (over any transport).
        LinkCreate => "link.create",
        /// A link's target, expiry, tags, limits, password, domain or routing changed.
        LinkUpdate => "link.update",
        /// A link was disabled.
        LinkDisable => "link.disable",
        /// A link was enabled again.
        LinkEnable => "link.enable",
        /// A link was deleted.
        LinkDelete => "link.delete",
        /// Links were imported in bulk (one entry per import, with its counts).
        LinkImport => "link.import",
        /// A tag was renamed on every link of a tenant.
        TagRename => "tag.rename",
        /// A tag was removed from every link of a tenant.
        TagDelete => "tag.delete",
        /// A branded domain was claimed.
        DomainClaim => "domain.claim",
        /// A branded domain's settings changed.
        DomainUpdate => "domain.update",
        /// A branded domain was removed.
        DomainDelete => "domain.delete",
        /// An API key was made.
        KeyCreate => "key.create",
        /// An API key was revoked.
        KeyRevoke => "key.revoke",
        /// A webhook endpoint was registered.
        WebhookCreate => "webhook.create",
        /// A webhook endpoint was enabled or disabled.
        WebhookUpdate => "webhook.update",
        /// A webhook endpoint was removed.
        WebhookDelete => "webhook.delete",
        /// A target domain was blocked.
        BlocklistAdd => "blocklist.add",
        /// A target domain was unblocked.
        BlocklistRemove => "blocklist.remove",
        /// A tenant's role mappings changed in the roles file (one entry per tenant and node).
        RoleMappingChange => "role_mapping.change",
        /// A person signed in.
        SignIn => "signin",
        /// A sign-in was refused.
        SignInFailed => "signin_failed",
    }
}

names! {
    /// What kind of object an action was done to.
    ObjectKind {
        /// A link, by its code (as shown, with `@host` on a branded domain).
        Link => "link",
        /// A tag, by name.
        Tag => "tag",
        /// An import, by the number of rows it read.
        Import => "import",
        /// A branded domain, by host.
        Domain => "domain",
        /// An API key, by name.
        Key => "key",
        /// A webhook endpoint, by number.
        Webhook => "webhook",
        /// A blocked domain, by its entry.
        Blocklist => "blocklist",
        /// A tenant's role mappings, by the tenant.
        RoleMapping => "role_mapping",
        /// A console session (sign-ins), by the person's subject.
        Session => "session",
    }
}
