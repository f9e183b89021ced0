//! The catalogue of checks: each one's name, the section of docs/connector.md that states its
//! rule, and the rule in a line. The report lists them in this order.

/// One conformance check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// The name printed in the report (`verification-echo`).
    pub name: &'static str,
    /// Where the rule is stated (`docs/connector.md`, then the section sign and its number).
    pub section: &'static str,
    /// The rule, in a line.
    pub rule: &'static str,
}

macro_rules! checks {
    ($($constant:ident = $name:literal, $section:literal, $rule:literal;)*) => {
        $(
            pub(crate) const $constant: Check = Check {
                name: $name,
                section: concat!("docs/connector.md §", $section),
                rule: $rule,
            };
        )*
        /// Every check, in the order they run and are reported.
        pub const CHECKS: &[Check] = &[$($constant),*];
    };
}

checks! {
    VERIFICATION_ECHO = "verification-echo", "2.2",
        "Verify answers 200, a JSON object, and X-HMAC = the HMAC of the X-HMAC-Timestamp sent";
    VERIFICATION_PROOF = "verification-proof", "2.2",
        "Verify's X-Verification-Proof, when given, is the HMAC of the request's nonce";
    REFUSES_BAD_HMAC = "refuses-bad-hmac", "2.3",
        "a call whose X-HMAC and X-Compatible-HMAC do not match the secret is refused (401)";
    REFUSES_STALE_TIMESTAMP = "refuses-stale-timestamp", "2.3",
        "a call whose X-HMAC-Timestamp is more than 5 minutes off is refused (401)";
    REFUSES_UNSIGNED = "refuses-unsigned", "2.3",
        "a call without X-HMAC and X-Compatible-HMAC is refused (401)";
    ACCEPTS_COMPATIBLE_HMAC = "accepts-compatible-hmac", "2.3",
        "a call whose X-Compatible-HMAC alone matches is accepted (a rotation's grace)";
    REFUSES_BAD_MESSAGE_SIGNATURE = "refuses-bad-message-signature", "2.3",
        "a call whose message signature is wrong, another operation's or missing is refused (401)";
    REFUSES_REPLAYED_NONCE = "refuses-replayed-nonce", "2.3",
        "a call sent again with the same message signature (its nonce seen) is refused (401)";
    CREATE_CUSTOMER = "create-customer", "3.2",
        "Create Customer answers 201 with the customer, its platform_id and times";
    CREATE_ADDRESS = "create-address", "3.2",
        "Create Address answers 201 with the address, its platform_id and platform_customer_id";
    CREATE_ORDER = "create-order", "3.2",
        "Create Order answers 201 with the order, its platform_id and platform_updated_at";
    CUSTOMERS_PAGING = "customers-paging", "3.3",
        "List Customers ascends by platform_id; limit caps a page; cursors visit each once";
    CUSTOMERS_LIMIT_FALLBACK = "customers-limit-fallback", "3.3",
        "List Customers without limit, or with one outside 1..250, answers pages of 250";
    CUSTOMERS_EMAIL_FILTER = "customers-email-filter", "3.3",
        "List Customers with email= answers only the customers of that email";
    ORDERS_PAGING = "orders-paging", "3.3",
        "List Orders ascends by platform_id; limit caps a page; cursors visit each once";
    ORDERS_LIMIT_FALLBACK = "orders-limit-fallback", "3.3",
        "List Orders without limit, or with one outside 1..250, answers pages of 250";
    PRODUCTS_PAGING = "products-paging", "3.3",
        "List Products ascends by platform_id; limit caps a page; cursors visit each once";
    PRODUCTS_LIMIT_FALLBACK = "products-limit-fallback", "3.3",
        "List Products without limit, or with one outside 1..250, answers pages of 250";
    CATEGORIES_PAGING = "categories-paging", "3.3",
        "List Categories ascends by platform_id; limit caps a page; cursors visit each once";
    CATEGORIES_LIMIT_FALLBACK = "categories-limit-fallback", "3.3",
        "List Categories without limit, or with one outside 1..250, answers pages of 250";
    CUSTOMER_PARTIAL_UPDATE = "customer-partial-update", "3.4",
        "Update Customer with one field changes it and leaves the others as they were";
    ADDRESS_PARTIAL_UPDATE = "address-partial-update", "3.4",
        "Update Address with one field changes it and leaves the others as they were";
    ORDER_PARTIAL_UPDATE = "order-partial-update", "3.4",
        "Update Order with one field changes it and leaves the others as they were";
    ORDER_IDEMPOTENCY = "order-idempotency", "3.5",
        "Create Order again with the same Idempotency-Key answers the first order, not a new one";
    VALIDATE_CUSTOMER_JWT = "validate-customer-jwt", "3.6",
        "Validate Customer JWT answers active: false for a token that is not the customer's";
    CUSTOMER_NOT_FOUND = "customer-not-found", "3.7",
        "Update, Delete and Validate of an unknown customer answer 404";
    ADDRESS_NOT_FOUND = "address-not-found", "3.7",
        "Create, Update and Delete Address of an unknown customer or address answer 404";
    ORDER_NOT_FOUND = "order-not-found", "3.7",
        "Get and Update Order of an unknown order answer 404";
    ADDRESS_SOFT_DELETE = "address-soft-delete", "3.8",
        "Delete Address answers 204; the address is then gone from its customer and 404";
    CUSTOMER_SOFT_DELETE = "customer-soft-delete", "3.8",
        "Delete Customer answers 204; the customer is then gone from lists and 404";
    JSON_ANSWERS = "json-answers", "3.1",
        "every successful answer with a body is JSON, with Content-Type: application/json";
    TEST_DATA_REMOVED = "test-data-removed", "6.3",
        "the test customers and addresses the checks made are deleted again";
}

#[cfg(test)]
mod tests {
    use super::CHECKS;

    /// docs/connector.md lists every check under section 6.2 and has a heading for each section.
    #[test]
    fn the_connector_documentation_states_every_checks_rule() {
        let doc = include_str!("../../../../docs/connector.md");
        for check in CHECKS {
            assert!(
                doc.contains(&format!("`{}`", check.name)),
                "docs/connector.md does not list {}",
                check.name
            );
            let number = check.section.trim_start_matches("docs/connector.md §");
            assert!(
                doc.lines()
                    .any(|line| line.starts_with('#') && line.contains(&format!(" {number} "))),
                "docs/connector.md has no section {number} (for {})",
                check.name
            );
        }
        let mut names: Vec<&str> = CHECKS.iter().map(|check| check.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CHECKS.len(), "check names are unique");
    }
}
