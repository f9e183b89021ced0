//! The diesel schema, one for both databases (migrations/sqlite and migrations/postgres create
//! the same tables and types).

diesel::table! {
    shops (id) {
        id -> BigInt,
        identifier -> Text,
        shop_domain -> Text,
        custom_domain -> Nullable<Text>,
        platform_type -> Text,
        timezone -> Text,
        currency -> Text,
        currency_format -> Text,
        shop_owner -> Text,
        admin_email -> Text,
        pii_redacted_at -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
        portal_accent -> Nullable<Text>,
        portal_logo_url -> Nullable<Text>,
    }
}

diesel::table! {
    /// A shop's settings of the scheduler (and, later, of checkout): one row per shop.
    shop_settings (shop_id) {
        shop_id -> BigInt,
        order_retry_interval_seconds -> BigInt,
        order_max_retries -> BigInt,
        expiring_payment_notice_days -> BigInt,
        updated_at -> BigInt,
        abandoned_cart_emails -> Bool,
        gift_cards_enabled -> Bool,
        gift_card_skus -> Text,
        flat_shipping_rate_cents -> BigInt,
        require_message_signatures -> Bool,
        rate_limit_per_s -> Nullable<BigInt>,
        connector_events_rate_limit_per_s -> Nullable<BigInt>,
        storefront_rate_limit_per_s -> Nullable<BigInt>,
    }
}

diesel::table! {
    /// Request budgets' buckets shared by the processes on one PostgreSQL database (migration
    /// 150).
    request_budgets (budget_key) {
        budget_key -> Text,
        tokens -> Double,
        refilled_at -> BigInt,
        last_granted -> Double,
    }
}

diesel::table! {
    api_tokens (id) {
        id -> BigInt,
        shop_id -> BigInt,
        name -> Text,
        token_hash -> Text,
        token_prefix -> Text,
        scopes -> Text,
        source -> Text,
        created_at -> BigInt,
        revoked_at -> Nullable<BigInt>,
        last_used_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    shared_secrets (id) {
        id -> BigInt,
        shop_id -> BigInt,
        kind -> Text,
        current_secret -> Text,
        previous_secret -> Nullable<Text>,
        previous_valid_until -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    staff_accounts (id) {
        id -> BigInt,
        shop_id -> BigInt,
        email -> Text,
        password_hash -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        last_sign_in_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    oauth_apps (id) {
        id -> BigInt,
        client_id -> Text,
        client_secret_hash -> Text,
        name -> Text,
        redirect_uris -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::joinable!(api_tokens -> shops (shop_id));
diesel::joinable!(shop_settings -> shops (shop_id));
diesel::joinable!(shared_secrets -> shops (shop_id));
diesel::joinable!(staff_accounts -> shops (shop_id));

diesel::table! {
    staff_sessions (id) {
        id -> BigInt,
        token_hash -> Text,
        shop_id -> BigInt,
        staff_id -> BigInt,
        created_at -> BigInt,
        last_seen_at -> BigInt,
        expires_at -> BigInt,
    }
}

diesel::joinable!(staff_sessions -> staff_accounts (staff_id));

diesel::table! {
    audit_log (id) {
        id -> BigInt,
        shop_id -> BigInt,
        staff_id -> BigInt,
        staff_email -> Text,
        action -> Text,
        subject -> Text,
        at -> BigInt,
    }
}

diesel::table! {
    /// A shop's subscription analytics per shop-local day (subscriptions::analytics,
    /// migration 80), in shards (migration 180).
    shop_analytics (shop_id, day, metric, shard) {
        shop_id -> BigInt,
        day -> BigInt,
        metric -> Text,
        value -> BigInt,
        shard -> SmallInt,
    }
}

diesel::table! {
    /// Present while the analytics counters wait for their one-time backfill (migration 80).
    analytics_backfill (id) {
        id -> BigInt,
    }
}

diesel::table! {
    /// A shop's activity in five-minute buckets (kernel::activity, migration 18), in shards
    /// (migration 180).
    shop_activity (shop_id, bucket, activity, shard) {
        shop_id -> BigInt,
        bucket -> BigInt,
        activity -> Text,
        count -> BigInt,
        shard -> SmallInt,
    }
}

diesel::table! {
    sign_in_failures (account_key, client) {
        account_key -> Text,
        client -> Text,
        failures -> Integer,
        locked_until -> Nullable<BigInt>,
        updated_at -> BigInt,
    }
}

diesel::table! {
    destinations (id) {
        id -> BigInt,
        shop_id -> BigInt,
        topic -> Text,
        url -> Text,
        version -> Text,
        timeout_ms -> BigInt,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    platform_customers (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Nullable<Text>,
        email -> Text,
        first_name -> Text,
        last_name -> Text,
        phone -> Text,
        platform_created_at -> Nullable<BigInt>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
        notes -> Nullable<Text>,
        pii_redacted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    customer_addresses (id) {
        id -> BigInt,
        shop_id -> BigInt,
        customer_id -> BigInt,
        address_key -> Text,
        platform_id -> Nullable<Text>,
        is_default -> Bool,
        document -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    customer_labels (id) {
        id -> BigInt,
        shop_id -> BigInt,
        customer_id -> BigInt,
        name -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    /// The shop's customer groups as the platform names them (migration 30), keyed by their
    /// platform id.
    customer_groups (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        name -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    /// Which customers belong to which groups (migration 30).
    customer_group_members (customer_id, group_id) {
        customer_id -> BigInt,
        group_id -> BigInt,
    }
}

diesel::table! {
    platform_orders (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        platform_customer_id -> Nullable<Text>,
        order_number -> Nullable<Text>,
        fulfillment_status -> Nullable<Text>,
        financial_status -> Nullable<Text>,
        placed_at -> Nullable<BigInt>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    platform_products (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        name -> Nullable<Text>,
        handle -> Nullable<Text>,
        published -> Nullable<Bool>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    product_variants (id) {
        id -> BigInt,
        shop_id -> BigInt,
        product_id -> BigInt,
        platform_id -> Nullable<Text>,
        sku -> Nullable<Text>,
        name -> Nullable<Text>,
        price -> Nullable<Text>,
        inventory_quantity -> Nullable<BigInt>,
        document -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    platform_categories (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        name -> Nullable<Text>,
        image_url -> Nullable<Text>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    inbound_events (id) {
        id -> BigInt,
        shop_id -> BigInt,
        entity -> Text,
        action -> Text,
        platform_id -> Text,
        occurred_at -> BigInt,
        document -> Nullable<Text>,
        source -> Text,
        received_at -> BigInt,
        attempts -> BigInt,
        retry_at -> BigInt,
        last_error -> Nullable<Text>,
    }
}

diesel::table! {
    failed_inbound_events (id) {
        id -> BigInt,
        shop_id -> BigInt,
        entity -> Text,
        action -> Text,
        platform_id -> Text,
        occurred_at -> BigInt,
        document -> Nullable<Text>,
        source -> Text,
        received_at -> BigInt,
        attempts -> BigInt,
        error -> Text,
        failed_at -> BigInt,
    }
}

diesel::table! {
    sync_runs (id) {
        id -> BigInt,
        shop_id -> BigInt,
        topic -> Text,
        status -> Text,
        pages -> BigInt,
        items -> BigInt,
        skipped -> BigInt,
        error -> Nullable<Text>,
        started_at -> BigInt,
        heartbeat_at -> BigInt,
        finished_at -> Nullable<BigInt>,
        next_cursor -> Nullable<Text>,
    }
}

diesel::table! {
    connector_outbox (id) {
        id -> BigInt,
        shop_id -> BigInt,
        topic -> Text,
        call -> Text,
        status -> Text,
        attempts -> BigInt,
        next_attempt_at -> BigInt,
        locked_until -> Nullable<BigInt>,
        last_error -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    api_overrides (id) {
        id -> BigInt,
        public_id -> Text,
        shop_id -> BigInt,
        override_type -> Text,
        url -> Text,
        shared_secret -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    oauth_codes (id) {
        id -> BigInt,
        code_hash -> Text,
        app_id -> BigInt,
        shop_id -> BigInt,
        staff_id -> BigInt,
        redirect_uri -> Text,
        scopes -> Text,
        code_challenge -> Nullable<Text>,
        expires_at -> BigInt,
        used_at -> Nullable<BigInt>,
        token_id -> Nullable<BigInt>,
        created_at -> BigInt,
    }
}

// `subscriptions` has 43 columns, and `table!` takes 16 here: diesel is built without its
// `32-column-tables` and `64-column-tables` features, which would take a clean debug build of
// diesel from about 30 s to 40 s and 150 s. So the one table is declared three times, each
// declaration a part of its columns (a few in more than one) under its own name:
// `subscriptions`, with every column without a default (a new row is one INSERT of it), and
// `subscription_schedule` and `subscription_details` (`sql_name = "subscriptions"`), written
// by UPDATEs of the same row. A query that needs columns of several declarations joins the
// row to itself by id through the aliases of `repos::subscriptions`, which give each its own
// name in the SQL: never join the declarations without them. A fourth declaration,
// `subscription_payment_notices`, holds the scheduler's `expiring_payment_notified_at`, which
// no subscription read needs (`repos::subscriptions::orders`); a fifth,
// `subscription_resumptions`, a paused subscription's `resume_on`.
diesel::table! {
    subscriptions (id) {
        id -> BigInt,
        shop_id -> BigInt,
        customer_id -> BigInt,
        billing_address_id -> BigInt,
        shipping_address_id -> BigInt,
        subscription_status -> Text,
        payment_rrule -> Text,
        payment_rrule_text -> Text,
        order_rrule -> Text,
        order_rrule_text -> Text,
        charged_currency -> Text,
        base_currency -> Text,
        base_to_charged_exchange_rate -> Double,
        latest_status_log_id -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    /// Counts and dates of a subscription: part of `subscriptions` (see there).
    #[sql_name = "subscriptions"]
    subscription_schedule (id) {
        id -> BigInt,
        shop_id -> BigInt,
        customer_id -> BigInt,
        subscription_status -> Text,
        orders_processed -> BigInt,
        current_retries -> BigInt,
        next_order_datetime -> Nullable<BigInt>,
        next_payment_datetime -> Nullable<BigInt>,
        next_processing_datetime -> Nullable<BigInt>,
        last_payment_datetime -> Nullable<BigInt>,
        last_order_datetime -> Nullable<BigInt>,
        last_processed_datetime -> Nullable<BigInt>,
        status_changed_at -> Nullable<BigInt>,
        placed_at -> Nullable<BigInt>,
        skipped_dates -> Text,
        percent_discount -> Double,
    }
}

diesel::table! {
    /// The other columns of a subscription: part of `subscriptions` (see there).
    #[sql_name = "subscriptions"]
    subscription_details (id) {
        id -> BigInt,
        shop_id -> BigInt,
        external_id -> Nullable<Text>,
        idempotency_key -> Nullable<Text>,
        idempotency_fingerprint -> Nullable<Text>,
        payment_method_token -> Nullable<Text>,
        payment_gateway_public_id -> Nullable<Text>,
        payment_gateway_customer_id -> Nullable<Text>,
        discount_code -> Nullable<Text>,
        shipping_lines -> Text,
        last_failure_code -> Nullable<Text>,
        last_failure_reason -> Nullable<Text>,
        last_failure_message -> Nullable<Text>,
        note -> Nullable<Text>,
        order_note -> Nullable<Text>,
        payment_method_expires_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    /// Whether a subscription's payment method was announced as expiring: part of
    /// `subscriptions` (see there).
    #[sql_name = "subscriptions"]
    subscription_payment_notices (id) {
        id -> BigInt,
        shop_id -> BigInt,
        subscription_status -> Text,
        payment_method_expires_at -> Nullable<BigInt>,
        expiring_payment_notified_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    /// When a paused subscription comes back by itself (migration 40): part of `subscriptions`
    /// (see there).
    #[sql_name = "subscriptions"]
    subscription_resumptions (id) {
        id -> BigInt,
        shop_id -> BigInt,
        subscription_status -> Text,
        resume_on -> Nullable<Text>,
        resume_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    /// Shops' cancellation reasons, in their order (migration 40).
    subscription_cancellation_reasons (id) {
        id -> BigInt,
        shop_id -> BigInt,
        position -> Integer,
        code -> Text,
        label -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    /// Shops' dunning policies, for the shops that set one (migration 51).
    subscription_dunning_policies (shop_id) {
        shop_id -> BigInt,
        retry_intervals_s -> Text,
        at_max_retries -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    /// Subscription CSV imports and how far each has gone (migration 90).
    subscription_imports (id) {
        id -> BigInt,
        shop_id -> BigInt,
        rows_total -> BigInt,
        rows_done -> BigInt,
        created -> BigInt,
        skipped_existing -> BigInt,
        failed_rows -> BigInt,
        started_at -> BigInt,
        updated_at -> BigInt,
        status -> Text,
        finished_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    /// The scheduler's attempts to place subscription orders (docs/scheduler.md).
    subscription_orders (id) {
        id -> BigInt,
        shop_id -> BigInt,
        subscription_id -> BigInt,
        scheduled_at -> BigInt,
        attempt -> BigInt,
        idempotency_key -> Text,
        status -> Text,
        due_at -> BigInt,
        platform_order_id -> Nullable<Text>,
        platform_payment_id -> Nullable<Text>,
        failure_code -> Nullable<Text>,
        failure_reason -> Nullable<Text>,
        finished_at -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    subscription_line_items (id) {
        id -> BigInt,
        shop_id -> BigInt,
        subscription_id -> BigInt,
        platform_product_id -> Text,
        platform_variant_id -> Text,
        quantity -> BigInt,
        price -> BigInt,
        document -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        subscription_group_id -> Nullable<BigInt>,
        subscription_group_billing_rules_id -> Nullable<BigInt>,
    }
}

diesel::table! {
    /// Subscription groups (migration 14); `products` is JSON.
    subscription_groups (id) {
        id -> BigInt,
        shop_id -> BigInt,
        name -> Text,
        percent_discount -> Double,
        products -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    subscription_group_billing_rules (id) {
        id -> BigInt,
        shop_id -> BigInt,
        subscription_group_id -> BigInt,
        position -> Integer,
        interval_number -> Integer,
        interval_type -> Text,
        interval_name -> Text,
        billing_rule -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::joinable!(subscription_group_billing_rules -> subscription_groups (subscription_group_id));

diesel::table! {
    /// The box builder (migration 15); `attributes` are JSON.
    boxes (id) {
        id -> BigInt,
        shop_id -> BigInt,
        subscription_group_id -> BigInt,
        box_name -> Text,
        attributes -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    box_products (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_product_id -> Text,
        platform_variant_id -> Text,
        attributes -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    box_sizes (id) {
        id -> BigInt,
        shop_id -> BigInt,
        box_id -> BigInt,
        box_size_name -> Text,
        pricing_mode -> Text,
        min_quantity -> BigInt,
        max_quantity -> BigInt,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    time_slots (id) {
        id -> BigInt,
        shop_id -> BigInt,
        box_id -> BigInt,
        time_slot_name -> Text,
        start_date -> BigInt,
        end_date -> BigInt,
        selection_deadline_date -> BigInt,
        visibility_date -> BigInt,
        attributes -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    time_slot_options (id) {
        id -> BigInt,
        shop_id -> BigInt,
        time_slot_id -> BigInt,
        box_product_id -> BigInt,
        created_at -> BigInt,
    }
}

diesel::joinable!(time_slot_options -> box_products (box_product_id));

diesel::table! {
    /// Selections (migration 16); `line_items` is JSON.
    box_selections (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_customer_id -> Text,
        subscription_line_item_id -> BigInt,
        box_id -> BigInt,
        box_size_id -> BigInt,
        time_slot_id -> BigInt,
        order_datetime -> BigInt,
        line_items -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    subscription_status_logs (id) {
        id -> BigInt,
        shop_id -> BigInt,
        subscription_id -> BigInt,
        subscription_status -> Text,
        reason -> Text,
        actor_type -> Text,
        actor_id -> BigInt,
        actor_name -> Text,
        created_at -> BigInt,
        cancellation_reason -> Nullable<Text>,
        cancellation_comment -> Nullable<Text>,
    }
}

diesel::joinable!(customer_addresses -> platform_customers (customer_id));
diesel::joinable!(customer_labels -> platform_customers (customer_id));
diesel::joinable!(customer_group_members -> platform_customers (customer_id));
diesel::joinable!(customer_group_members -> customer_groups (group_id));
diesel::joinable!(product_variants -> platform_products (product_id));
diesel::joinable!(subscriptions -> platform_customers (customer_id));
diesel::joinable!(subscription_line_items -> subscriptions (subscription_id));
diesel::joinable!(subscription_status_logs -> subscriptions (subscription_id));

diesel::table! {
    /// Checkouts of the headless checkout (migration 11): the columns looked up and swept by,
    /// the rest in `document`.
    checkout_orders (id) {
        id -> BigInt,
        shop_id -> BigInt,
        public_order_id -> Text,
        status -> Text,
        email -> Nullable<Text>,
        item_count -> BigInt,
        platform_order_id -> Nullable<Text>,
        last_activity_at -> BigInt,
        abandoned_at -> Nullable<BigInt>,
        fulfilled_at -> Nullable<BigInt>,
        version -> BigInt,
        document -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::joinable!(checkout_orders -> shops (shop_id));

diesel::table! {
    /// Customers' sessions of the subscriber portal (migration 50), found by their token's hash.
    portal_sessions (id) {
        id -> BigInt,
        token_hash -> Text,
        shop_id -> BigInt,
        platform_customer_id -> Text,
        created_at -> BigInt,
        last_seen_at -> BigInt,
        expires_at -> BigInt,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    checkout_orders,
    portal_sessions,
    shops,
    shop_settings,
    api_tokens,
    shared_secrets,
    staff_accounts,
    staff_sessions,
    audit_log,
    shop_activity,
    oauth_apps,
    destinations,
    platform_customers,
    customer_addresses,
    customer_labels,
    customer_groups,
    customer_group_members,
    platform_orders,
    platform_products,
    product_variants,
    platform_categories,
    inbound_events,
    failed_inbound_events,
    sync_runs,
    connector_outbox,
    webhook_endpoints,
    webhook_throttles,
    webhook_messages,
    webhook_attempts,
    api_overrides,
    oauth_codes,
    subscriptions,
    subscription_schedule,
    subscription_details,
    subscription_line_items,
    subscription_status_logs,
    subscription_orders,
    subscription_payment_notices,
    subscription_resumptions,
    subscription_cancellation_reasons,
    subscription_dunning_policies,
    subscription_imports,
    subscription_groups,
    subscription_group_billing_rules,
    boxes,
    box_products,
    box_sizes,
    time_slots,
    time_slot_options,
    box_selections,
);

diesel::table! {
    webhook_endpoints (id) {
        id -> BigInt,
        public_id -> Text,
        shop_id -> BigInt,
        kind -> Text,
        topic -> Text,
        callback_url -> Text,
        secret -> Nullable<Text>,
        disabled_at -> Nullable<BigInt>,
        disabled_reason -> Nullable<Text>,
        failing_since -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
        rate_limit_per_s -> Nullable<Integer>,
    }
}

diesel::table! {
    /// The send-time state of each throttled webhook endpoint (`repos::webhooks::throttles`).
    /// `webhook_messages.throttled` is not declared (`table!` takes 16 columns here): the
    /// queries that read it are written out.
    webhook_throttles (endpoint_id) {
        endpoint_id -> BigInt,
        interval_us -> BigInt,
        next_slot_at -> BigInt,
    }
}

diesel::table! {
    webhook_messages (id) {
        id -> BigInt,
        message_id -> Text,
        shop_id -> BigInt,
        endpoint_id -> BigInt,
        topic -> Text,
        payload -> Nullable<Text>,
        status -> Text,
        attempts -> BigInt,
        next_attempt_at -> BigInt,
        created_at -> BigInt,
        updated_at -> BigInt,
        delivered_at -> Nullable<BigInt>,
        subject -> Nullable<Text>,
        request_id -> Nullable<Text>,
        trace_parent -> Nullable<Text>,
        purged_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    webhook_attempts (id) {
        id -> BigInt,
        message_id -> BigInt,
        attempted_at -> BigInt,
        status -> Nullable<Integer>,
        latency_us -> BigInt,
        response -> Nullable<Text>,
        error -> Nullable<Text>,
        retry_after_ms -> Nullable<BigInt>,
    }
}

diesel::table! {
    jobs (id) {
        id -> BigInt,
        kind -> Text,
        payload -> Text,
        unique_key -> Nullable<Text>,
        state -> Text,
        run_at -> BigInt,
        attempts -> BigInt,
        max_attempts -> BigInt,
        locked_by -> Nullable<Text>,
        locked_until -> Nullable<BigInt>,
        again_at -> Nullable<BigInt>,
        last_error -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        shop_id -> Nullable<BigInt>,
        request_id -> Nullable<Text>,
    }
}

diesel::table! {
    /// The trace a job was enqueued in: part of `jobs`, declared apart because `table!` takes 16
    /// columns here (see `subscriptions`). Written only when traces are exported.
    #[sql_name = "jobs"]
    job_trace_parents (id) {
        id -> BigInt,
        trace_parent -> Nullable<Text>,
    }
}

diesel::table! {
    /// The mercer processes running on the database (`crate::processes`).
    processes (id) {
        id -> Text,
        version -> Text,
        schema_version -> Text,
        name -> Text,
        heartbeat_ms -> BigInt,
        started_at -> BigInt,
        last_seen -> BigInt,
    }
}
