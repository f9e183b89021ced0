//! The connector operations against Vendure's Admin API: what each one reads and writes, and
//! the interface's rules (partial updates, soft deletes, cursors, `limit`, 404s, Create Order
//! idempotent by its key).

use mercer_domain::kernel::money::CurrencyCode;
use mercer_domain::platform::resources::{
    Category, Customer, CustomerAddress, Decimal, LineItem, Order, OrderAddress, Pagination,
    Payment, Product,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::model::{
    ADDRESS_FRAGMENT, COLLECTION_FIELDS, CUSTOMER_FIELDS, ORDER_ADDRESS_FRAGMENT, ORDER_FIELDS,
    PRODUCT_FIELDS, VAddress, VCollection, VCustomer, VOrder, VProduct, full_name, minor_units,
};
use crate::vendure::{Vendure, VendureError, entity_or_refusal};

/// The most entities one page holds, and what a `limit` outside 1..=250 (or none) means.
pub use mercer_connector::kit::DEFAULT_PAGE_LIMIT;

/// A page of a list: its entities and the cursor of the next page.
pub type Page<T> = (Vec<T>, Pagination);

/// The kinds of entity the lists page through, by the plugin's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    Customer,
    Order,
    Product,
    Collection,
}

impl Listed {
    fn name(self) -> &'static str {
        match self {
            Listed::Customer => "customer",
            Listed::Order => "order",
            Listed::Product => "product",
            Listed::Collection => "collection",
        }
    }
}

/// The ids of a page after `cursor` (ascending), and whether more follow.
fn page_ids(
    vendure: &Vendure,
    kind: Listed,
    limit: usize,
    cursor: Option<&str>,
) -> Result<(Vec<String>, bool), VendureError> {
    #[derive(Deserialize)]
    struct Ids {
        #[serde(rename = "mercerIds")]
        ids: Vec<String>,
    }
    let after = cursor.filter(|cursor| !cursor.is_empty());
    if after.is_some_and(|after| after.parse::<u64>().is_err()) {
        return Err(VendureError::Refused("unknown cursor".to_string()));
    }
    let Ids { mut ids } = vendure.admin(
        "query($entity: String!, $after: ID, $take: Int!) {
            mercerIds(entity: $entity, after: $after, take: $take)
        }",
        json!({ "entity": kind.name(), "after": after, "take": limit + 1 }),
    )?;
    let more = ids.len() > limit;
    ids.truncate(limit);
    Ok((ids, more))
}

fn pagination(ids: &[String], more: bool) -> Pagination {
    Pagination {
        next: more.then(|| ids.last().cloned()).flatten(),
        prev: None,
    }
}

/// Entities of a list query by ids, in the order of `ids`.
fn by_ids<T: DeserializeOwned>(
    vendure: &Vendure,
    list: &str,
    fields: &str,
    fragments: &str,
    ids: &[String],
    id_of: impl Fn(&T) -> &str,
) -> Result<Vec<T>, VendureError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let query = format!(
        "query($ids: [String!]!, $take: Int!) {{
            list: {list}(options: {{filter: {{id: {{in: $ids}}}}, take: $take}}) {{ items {{ {fields} }} }}
        }}
        {fragments}"
    );
    #[derive(Deserialize)]
    struct Items<T> {
        items: Vec<T>,
    }
    #[derive(Deserialize)]
    struct List<T> {
        list: Items<T>,
    }
    let List { list } =
        vendure.admin::<List<T>>(&query, json!({ "ids": ids, "take": ids.len() }))?;
    let mut found = list.items;
    found.sort_by_key(|item| ids.iter().position(|id| id == id_of(item)));
    Ok(found)
}

/// List Customers: ascending by id, `limit` a page, `email` only the customers of that email.
pub fn list_customers(
    vendure: &Vendure,
    limit: usize,
    cursor: Option<&str>,
    email: Option<&str>,
) -> Result<Page<Customer>, VendureError> {
    if let Some(email) = email.filter(|email| !email.trim().is_empty()) {
        let customers = customers_by_email(vendure, email)?;
        return Ok((customers, Pagination::default()));
    }
    let (ids, more) = page_ids(vendure, Listed::Customer, limit, cursor)?;
    let customers = by_ids::<VCustomer>(
        vendure,
        "customers",
        CUSTOMER_FIELDS,
        ADDRESS_FRAGMENT,
        &ids,
        |c| &c.id,
    )?;
    let customers = customers.iter().map(VCustomer::to_customer).collect();
    Ok((customers, pagination(&ids, more)))
}

fn customers_by_email(vendure: &Vendure, email: &str) -> Result<Vec<Customer>, VendureError> {
    let query = format!(
        "query($email: String!) {{
            list: customers(options: {{filter: {{emailAddress: {{eq: $email}}}}, sort: {{id: ASC}}}}) {{
                items {{ {CUSTOMER_FIELDS} }}
            }}
        }}
        {ADDRESS_FRAGMENT}"
    );
    #[derive(Deserialize)]
    struct List {
        list: Items,
    }
    #[derive(Deserialize)]
    struct Items {
        items: Vec<VCustomer>,
    }
    let List { list } = vendure.admin(&query, json!({ "email": email.trim() }))?;
    Ok(list.items.iter().map(VCustomer::to_customer).collect())
}

/// A customer by id, with addresses and groups; NotFound when there is none (or it was
/// deleted).
pub fn customer(vendure: &Vendure, id: &str) -> Result<VCustomer, VendureError> {
    #[derive(Deserialize)]
    struct One {
        customer: Option<VCustomer>,
    }
    let query = format!(
        "query($id: ID!) {{ customer(id: $id) {{ {CUSTOMER_FIELDS} }} }} {ADDRESS_FRAGMENT}"
    );
    let One { customer } = vendure.admin(&query, json!({ "id": id }))?;
    customer.ok_or(VendureError::NotFound)
}

fn customer_input(customer: &Customer) -> Map<String, Value> {
    let mut input = Map::new();
    let mut set = |key: &str, value: &Option<String>| {
        if let Some(value) = value {
            input.insert(key.to_string(), json!(value));
        }
    };
    set("emailAddress", &customer.email);
    set("firstName", &customer.first_name);
    set("lastName", &customer.last_name);
    set("phoneNumber", &customer.phone);
    input
}

/// Create Customer, with the addresses it is sent with.
pub fn create_customer(vendure: &Vendure, sent: &Customer) -> Result<Customer, VendureError> {
    let mut input = customer_input(sent);
    input.entry("firstName").or_insert_with(|| json!(""));
    input.entry("lastName").or_insert_with(|| json!(""));
    if !input.contains_key("emailAddress") {
        return Err(VendureError::Refused("email is required".to_string()));
    }
    #[derive(Deserialize)]
    struct Created {
        #[serde(rename = "createCustomer")]
        created: Value,
    }
    let Created { created } = vendure.admin(
        "mutation($input: CreateCustomerInput!) {
            createCustomer(input: $input) {
                ... on Customer { id }
                ... on ErrorResult { errorCode message }
            }
        }",
        json!({ "input": input }),
    )?;
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    let Id { id } = entity_or_refusal(created)?;
    for address in sent.addresses.iter().flatten() {
        create_address(vendure, &id, address)?;
    }
    Ok(customer(vendure, &id)?.to_customer())
}

/// Update Customer: the fields sent replace the stored ones, the others stay.
pub fn update_customer(
    vendure: &Vendure,
    id: &str,
    sent: &Customer,
) -> Result<Customer, VendureError> {
    customer(vendure, id)?;
    let mut input = customer_input(sent);
    if !input.is_empty() {
        input.insert("id".to_string(), json!(id));
        #[derive(Deserialize)]
        struct Updated {
            #[serde(rename = "updateCustomer")]
            updated: Value,
        }
        let Updated { updated } = vendure.admin(
            "mutation($input: UpdateCustomerInput!) {
                updateCustomer(input: $input) {
                    ... on Customer { id }
                    ... on ErrorResult { errorCode message }
                }
            }",
            json!({ "input": input }),
        )?;
        entity_or_refusal::<Value>(updated)?;
    }
    Ok(customer(vendure, id)?.to_customer())
}

/// Delete Customer: Vendure keeps the row with its deletion time (a soft delete); the customer
/// is gone from lists and answers 404 from then on.
pub fn delete_customer(vendure: &Vendure, id: &str) -> Result<(), VendureError> {
    customer(vendure, id)?;
    #[derive(Deserialize)]
    struct Deleted {
        #[serde(rename = "deleteCustomer")]
        deleted: DeletionResponse,
    }
    let Deleted { deleted } = vendure.admin(
        "mutation($id: ID!) { deleteCustomer(id: $id) { result message } }",
        json!({ "id": id }),
    )?;
    deleted.check()
}

#[derive(Deserialize)]
struct DeletionResponse {
    result: String,
    message: Option<String>,
}

impl DeletionResponse {
    fn check(self) -> Result<(), VendureError> {
        match self.result.as_str() {
            "DELETED" => Ok(()),
            _ => Err(VendureError::Refused(self.message.unwrap_or(self.result))),
        }
    }
}

/// Validate Customer JWT: the token is a Shop API session token, active when the Shop API's
/// `activeCustomer` for it is this customer.
pub fn validate_customer_token(
    vendure: &Vendure,
    id: &str,
    token: &str,
) -> Result<bool, VendureError> {
    customer(vendure, id)?;
    if token.trim().is_empty() {
        return Ok(false);
    }
    Ok(vendure.active_customer(token.trim())?.as_deref() == Some(id))
}

fn address_input(address: &CustomerAddress, stored: Option<&VAddress>) -> Map<String, Value> {
    let mut input = Map::new();
    let (first, last) = match stored {
        Some(stored) => crate::model::split_name(stored.full_name.as_deref()),
        None => (None, None),
    };
    if address.first_name.is_some() || address.last_name.is_some() {
        let first = address.first_name.as_deref().or(first.as_deref());
        let last = address.last_name.as_deref().or(last.as_deref());
        input.insert("fullName".to_string(), json!(full_name(first, last)));
    }
    let mut set = |key: &str, value: &Option<String>| {
        if let Some(value) = value {
            input.insert(key.to_string(), json!(value));
        }
    };
    set("company", &address.company);
    set("streetLine1", &address.street_1);
    set("streetLine2", &address.street_2);
    set("city", &address.city);
    set("province", &address.province);
    set("postalCode", &address.postal_code);
    set("countryCode", &address.country_code);
    set("phoneNumber", &address.phone);
    if let Some(code) = &address.province_code {
        input.insert("customFields".to_string(), json!({ "provinceCode": code }));
    }
    if let Some(is_default) = address.is_default {
        input.insert("defaultShippingAddress".to_string(), json!(is_default));
        if address.address_type.as_deref() == Some("billing") {
            input.insert("defaultBillingAddress".to_string(), json!(is_default));
        }
    }
    input
}

/// The customer's address by id; NotFound when the customer or the address is unknown.
fn stored_address(
    vendure: &Vendure,
    customer_id: &str,
    address_id: &str,
) -> Result<(VCustomer, VAddress), VendureError> {
    let customer = customer(vendure, customer_id)?;
    let address = customer
        .addresses
        .iter()
        .flatten()
        .find(|address| address.id == address_id)
        .cloned()
        .ok_or(VendureError::NotFound)?;
    Ok((customer, address))
}

fn answered_address(
    vendure: &Vendure,
    customer_id: &str,
    address_id: &str,
) -> Result<CustomerAddress, VendureError> {
    let (customer, address) = stored_address(vendure, customer_id, address_id)?;
    let mut answer = address.to_address(customer_id);
    answer.email = Some(customer.email_address);
    Ok(answer)
}

#[derive(Deserialize)]
struct AddressId {
    id: String,
}

/// Create Address for a customer.
pub fn create_address(
    vendure: &Vendure,
    customer_id: &str,
    sent: &CustomerAddress,
) -> Result<CustomerAddress, VendureError> {
    customer(vendure, customer_id)?;
    let mut input = address_input(sent, None);
    if !input.contains_key("streetLine1") || !input.contains_key("countryCode") {
        return Err(VendureError::Refused(
            "street_1 and country_code are required".to_string(),
        ));
    }
    input.entry("fullName").or_insert_with(|| json!(""));
    #[derive(Deserialize)]
    struct Created {
        #[serde(rename = "createCustomerAddress")]
        created: AddressId,
    }
    let Created { created } = vendure.admin(
        "mutation($id: ID!, $input: CreateAddressInput!) {
            createCustomerAddress(customerId: $id, input: $input) { id }
        }",
        json!({ "id": customer_id, "input": input }),
    )?;
    answered_address(vendure, customer_id, &created.id)
}

/// Update Address: the fields sent replace the stored ones, the others stay.
pub fn update_address(
    vendure: &Vendure,
    customer_id: &str,
    address_id: &str,
    sent: &CustomerAddress,
) -> Result<CustomerAddress, VendureError> {
    let (_, stored) = stored_address(vendure, customer_id, address_id)?;
    let mut input = address_input(sent, Some(&stored));
    if !input.is_empty() {
        input.insert("id".to_string(), json!(address_id));
        #[derive(Deserialize)]
        struct Updated {
            #[serde(rename = "updateCustomerAddress")]
            #[allow(dead_code)]
            updated: AddressId,
        }
        vendure.admin::<Updated>(
            "mutation($input: UpdateAddressInput!) {
                updateCustomerAddress(input: $input) { id }
            }",
            json!({ "input": input }),
        )?;
    }
    answered_address(vendure, customer_id, address_id)
}

/// Delete Address: Vendure removes it; the customer's next event leaves it out.
pub fn delete_address(
    vendure: &Vendure,
    customer_id: &str,
    address_id: &str,
) -> Result<(), VendureError> {
    stored_address(vendure, customer_id, address_id)?;
    #[derive(Deserialize)]
    struct Deleted {
        #[serde(rename = "deleteCustomerAddress")]
        deleted: Success,
    }
    #[derive(Deserialize)]
    struct Success {
        success: bool,
    }
    let Deleted { deleted } = vendure.admin(
        "mutation($id: ID!) { deleteCustomerAddress(id: $id) { success } }",
        json!({ "id": address_id }),
    )?;
    match deleted.success {
        true => Ok(()),
        false => Err(VendureError::Refused(
            "Vendure kept the address".to_string(),
        )),
    }
}

/// An order by id; NotFound when there is none.
pub fn order(vendure: &Vendure, id: &str) -> Result<VOrder, VendureError> {
    #[derive(Deserialize)]
    struct One {
        order: Option<VOrder>,
    }
    let query = format!(
        "query($id: ID!) {{ order(id: $id) {{ {ORDER_FIELDS} }} }} {ORDER_ADDRESS_FRAGMENT}"
    );
    let One { order } = vendure.admin(&query, json!({ "id": id }))?;
    order.ok_or(VendureError::NotFound)
}

fn order_answer(order: &VOrder) -> Result<Order, VendureError> {
    order.to_order().ok_or_else(|| {
        VendureError::Unreachable(format!("order {} has an unknown currency", order.id))
    })
}

/// Get Order.
pub fn get_order(vendure: &Vendure, id: &str) -> Result<Order, VendureError> {
    order_answer(&order(vendure, id)?)
}

/// List Orders: placed orders and drafts, ascending by id (carts are not orders yet).
pub fn list_orders(
    vendure: &Vendure,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Page<Order>, VendureError> {
    let (ids, more) = page_ids(vendure, Listed::Order, limit, cursor)?;
    let orders = by_ids::<VOrder>(
        vendure,
        "orders",
        ORDER_FIELDS,
        ORDER_ADDRESS_FRAGMENT,
        &ids,
        |o| &o.id,
    )?;
    let orders = orders.iter().map(order_answer).collect::<Result<_, _>>()?;
    Ok((orders, pagination(&ids, more)))
}

/// List Products: with their variants, options, images and collections.
pub fn list_products(
    vendure: &Vendure,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Page<Product>, VendureError> {
    let (ids, more) = page_ids(vendure, Listed::Product, limit, cursor)?;
    let products = by_ids::<VProduct>(vendure, "products", PRODUCT_FIELDS, "", &ids, |p| &p.id)?;
    let products = products.iter().map(VProduct::to_product).collect();
    Ok((products, pagination(&ids, more)))
}

/// A product by id; NotFound when there is none (or it was deleted).
pub fn product(vendure: &Vendure, id: &str) -> Result<Product, VendureError> {
    #[derive(Deserialize)]
    struct One {
        product: Option<VProduct>,
    }
    let query = format!("query($id: ID!) {{ product(id: $id) {{ {PRODUCT_FIELDS} }} }}");
    let One { product } = vendure.admin(&query, json!({ "id": id }))?;
    product
        .map(|product| product.to_product())
        .ok_or(VendureError::NotFound)
}

/// List Categories: Vendure's public collections, ascending by id.
pub fn list_categories(
    vendure: &Vendure,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Page<Category>, VendureError> {
    let (ids, more) = page_ids(vendure, Listed::Collection, limit, cursor)?;
    let collections =
        by_ids::<VCollection>(vendure, "collections", COLLECTION_FIELDS, "", &ids, |c| {
            &c.id
        })?;
    let categories = collections.iter().map(VCollection::to_category).collect();
    Ok((categories, pagination(&ids, more)))
}

/// A collection by id as a category; NotFound when there is none.
pub fn category(vendure: &Vendure, id: &str) -> Result<Category, VendureError> {
    #[derive(Deserialize)]
    struct One {
        collection: Option<VCollection>,
    }
    let query = format!("query($id: ID!) {{ collection(id: $id) {{ {COLLECTION_FIELDS} }} }}");
    let One { collection } = vendure.admin(&query, json!({ "id": id }))?;
    collection
        .map(|collection| collection.to_category())
        .ok_or(VendureError::NotFound)
}

/// The channel's currency: what money without a currency of its own is in.
pub fn channel_currency(vendure: &Vendure) -> Result<CurrencyCode, VendureError> {
    #[derive(Deserialize)]
    struct Channel {
        #[serde(rename = "activeChannel")]
        channel: Code,
    }
    #[derive(Deserialize)]
    struct Code {
        #[serde(rename = "defaultCurrencyCode")]
        currency: String,
    }
    let Channel { channel } =
        vendure.admin("{ activeChannel { defaultCurrencyCode } }", json!({}))?;
    CurrencyCode::parse(&channel.currency).ok_or_else(|| {
        VendureError::Unreachable(format!("an unknown currency {}", channel.currency))
    })
}

/// The first order made with this Idempotency-Key, if any.
fn order_of_key(vendure: &Vendure, key: &str) -> Result<Option<String>, VendureError> {
    #[derive(Deserialize)]
    struct List {
        orders: Items,
    }
    #[derive(Deserialize)]
    struct Items {
        items: Vec<AddressId>,
    }
    let List { orders } = vendure.admin(
        "query($key: String!) {
            orders(options: {filter: {mercerIdempotencyKey: {eq: $key}}, sort: {id: ASC}, take: 1}) {
                items { id }
            }
        }",
        json!({ "key": key }),
    )?;
    Ok(orders.items.into_iter().next().map(|order| order.id))
}

/// The order's custom fields of what was sent: the key, the test flag, the custom attributes,
/// and the order's own discount and shipping price (which Vendure then charges).
fn order_custom_fields(
    sent: &Order,
    currency: &CurrencyCode,
) -> Result<Map<String, Value>, VendureError> {
    let mut fields = Map::new();
    if let Some(discount) = minor(sent.discount.as_ref(), currency, "discount")? {
        fields.insert("mercerOrderDiscount".to_string(), json!(discount));
    }
    if let Some(shipping) = minor(
        sent.shipping_subtotal.as_ref(),
        currency,
        "shipping_subtotal",
    )? {
        fields.insert("mercerShippingPrice".to_string(), json!(shipping));
    }
    if let Some(test) = sent.test {
        fields.insert("mercerTest".to_string(), json!(test));
    }
    if let Some(attributes) = &sent.custom_attributes {
        let text = serde_json::to_string(attributes).unwrap_or_default();
        fields.insert("mercerAttributes".to_string(), json!(text));
    }
    Ok(fields)
}

fn order_address_input(address: &OrderAddress) -> Value {
    json!({
        "fullName": full_name(address.first_name.as_deref(), address.last_name.as_deref()),
        "company": address.company,
        "streetLine1": address.street_1.clone().unwrap_or_default(),
        "streetLine2": address.street_2,
        "city": address.city,
        "province": address.province,
        "postalCode": address.postal_code,
        "countryCode": address.country_code.clone().unwrap_or_default(),
        "phoneNumber": address.phone,
    })
}

/// Mutations of an order that answer the order or one of Vendure's error results (a union);
/// the others answer the order alone.
const ORDER_UNION_MUTATIONS: &[&str] = &[
    "transitionOrderToState",
    "addManualPaymentToOrder",
    "addItemToDraftOrder",
    "setCustomerForDraftOrder",
    "setDraftOrderShippingMethod",
];

/// Runs a mutation whose answer is an order (or an error result, which is a refusal).
fn order_mutation(
    vendure: &Vendure,
    name: &str,
    signature: &str,
    arguments: &str,
    variables: Value,
) -> Result<(), VendureError> {
    let errors = match ORDER_UNION_MUTATIONS.contains(&name) {
        true => "... on ErrorResult { errorCode message }",
        false => "",
    };
    let query = format!(
        "mutation({signature}) {{
            answer: {name}({arguments}) {{
                ... on Order {{ id }}
                {errors}
            }}
        }}"
    );
    #[derive(Deserialize)]
    struct Answer {
        answer: Value,
    }
    let Answer { answer } = vendure.admin(&query, variables)?;
    entity_or_refusal::<Value>(answer).map(|_| ())
}

/// An amount of the order in the currency's minor units; a text that is not one is refused.
fn minor(
    amount: Option<&Decimal>,
    currency: &CurrencyCode,
    field: &str,
) -> Result<Option<i64>, VendureError> {
    amount
        .map(|amount| {
            minor_units(amount, currency)
                .ok_or_else(|| VendureError::Refused(format!("{field} is not an amount")))
        })
        .transpose()
}

/// Create Order: a draft order for the customer with the lines, addresses and shipping sent,
/// moved to `ArrangingPayment` once it has lines, a customer and shipping. A key given with
/// the call is kept on the order: the same key again answers the first order.
pub fn create_order(
    vendure: &Vendure,
    sent: &Order,
    key: Option<&str>,
) -> Result<Order, VendureError> {
    if let Some(key) = key
        && let Some(id) = order_of_key(vendure, key)?
    {
        return get_order(vendure, &id);
    }
    let currency = sent
        .currency
        .as_deref()
        .and_then(CurrencyCode::parse)
        .map_or_else(|| channel_currency(vendure), Ok)?;
    #[derive(Deserialize)]
    struct Draft {
        #[serde(rename = "createDraftOrder")]
        draft: AddressId,
    }
    let Draft { draft } = vendure.admin("mutation { createDraftOrder { id } }", json!({}))?;
    let id = draft.id;
    let filled = fill_draft(vendure, &id, sent, key, &currency);
    if let Err(error) = filled {
        // A draft that could not be made as sent is removed: a retry starts afresh.
        delete_draft(vendure, &id);
        return Err(error);
    }
    get_order(vendure, &id)
}

/// Removes a draft order; a draft that cannot be removed is left to the merchant.
fn delete_draft(vendure: &Vendure, id: &str) {
    let deleted = vendure.admin::<Value>(
        "mutation($id: ID!) { deleteDraftOrder(orderId: $id) { result } }",
        json!({ "id": id }),
    );
    if let Err(error) = deleted {
        tracing::warn!(order = id, %error, "a draft order could not be removed");
    }
}

/// Mutations of one draft order sent as one GraphQL document: Vendure runs a document's
/// mutations one after the other, in order, so a Create Order is a few round trips, not one
/// per line and address.
#[derive(Default)]
struct Batch {
    declarations: Vec<String>,
    fields: Vec<String>,
    variables: Map<String, Value>,
}

impl Batch {
    /// Adds the mutation `name` with these arguments: `(argument, GraphQL type, value)`.
    fn add(&mut self, name: &str, arguments: &[(&str, &str, Value)]) {
        let mut passed = Vec::new();
        for (argument, kind, value) in arguments {
            let variable = format!("v{}", self.variables.len());
            self.declarations.push(format!("${variable}: {kind}"));
            passed.push(format!("{argument}: ${variable}"));
            self.variables.insert(variable, value.clone());
        }
        let errors = match ORDER_UNION_MUTATIONS.contains(&name) {
            true => "... on ErrorResult { errorCode message }",
            false => "",
        };
        self.fields.push(format!(
            "m{}: {name}({}) {{ ... on Order {{ id }} {errors} }}",
            self.fields.len(),
            passed.join(", ")
        ));
    }

    /// Runs the mutations; an error result of any of them is a refusal.
    fn run(self, vendure: &Vendure) -> Result<(), VendureError> {
        if self.fields.is_empty() {
            return Ok(());
        }
        let query = format!(
            "mutation({}) {{ {} }}",
            self.declarations.join(", "),
            self.fields.join(" ")
        );
        let answers: Map<String, Value> = vendure.admin(&query, Value::Object(self.variables))?;
        for answer in answers.into_values() {
            entity_or_refusal::<Value>(answer)?;
        }
        Ok(())
    }
}

fn fill_draft(
    vendure: &Vendure,
    id: &str,
    sent: &Order,
    key: Option<&str>,
    currency: &CurrencyCode,
) -> Result<(), VendureError> {
    let mut batch = Batch::default();
    let order_id = ("orderId", "ID!", json!(id));
    let fields = order_custom_fields(sent, currency)?;
    if !fields.is_empty() {
        let input = json!({ "id": id, "customFields": fields });
        batch.add(
            "setDraftOrderCustomFields",
            &[order_id.clone(), ("input", "UpdateOrderInput!", input)],
        );
    }
    if let Some(customer) = &sent.platform_customer_id {
        batch.add(
            "setCustomerForDraftOrder",
            &[
                order_id.clone(),
                ("customerId", "ID!", json!(customer.as_str())),
            ],
        );
    }
    for line in sent.line_items.iter().flatten() {
        let input = line_input(line, currency)?;
        batch.add(
            "addItemToDraftOrder",
            &[
                order_id.clone(),
                ("input", "AddItemToDraftOrderInput!", input),
            ],
        );
    }
    if let Some(address) = sent.shipping_addresses.iter().flatten().next() {
        let input = order_address_input(address);
        batch.add(
            "setDraftOrderShippingAddress",
            &[order_id.clone(), ("input", "CreateAddressInput!", input)],
        );
    }
    if let Some(address) = &sent.billing_address {
        let input = order_address_input(address);
        batch.add(
            "setDraftOrderBillingAddress",
            &[order_id.clone(), ("input", "CreateAddressInput!", input)],
        );
    }
    for (note, public) in [(&sent.notes, false), (&sent.public_notes, true)] {
        if let Some(note) = note.as_deref().filter(|note| !note.is_empty()) {
            let input = json!({ "id": id, "note": note, "isPublic": public });
            batch.add(
                "addNoteToOrder",
                &[("input", "AddNoteToOrderInput!", input)],
            );
        }
    }
    let has_lines = sent
        .line_items
        .as_ref()
        .is_some_and(|lines| !lines.is_empty());
    if has_lines && sent.platform_customer_id.is_some() {
        batch.run(vendure)?;
        let priced = sent.shipping_subtotal.is_some();
        let method = shipping_method(vendure, id, sent.shipping_method.as_deref(), priced)?;
        batch = Batch::default();
        batch.add(
            "setDraftOrderShippingMethod",
            &[order_id.clone(), ("shippingMethodId", "ID!", json!(method))],
        );
        batch.add(
            "transitionOrderToState",
            &[
                ("id", "ID!", json!(id)),
                ("state", "String!", json!("ArrangingPayment")),
            ],
        );
    }
    // The key comes last: an order made only half way (the connector stopped) has none, so a
    // retry with the key makes the order whole rather than answering the half.
    if let Some(key) = key {
        let input = json!({ "id": id, "customFields": { "mercerIdempotencyKey": key } });
        batch.add(
            "setOrderCustomFields",
            &[("input", "UpdateOrderInput!", input)],
        );
    }
    batch.run(vendure)
}

/// A line of Create Order as Vendure's `AddItemToDraftOrderInput`, with Mercer's prices.
fn line_input(line: &LineItem, currency: &CurrencyCode) -> Result<Value, VendureError> {
    let variant = line
        .platform_variant_id
        .as_ref()
        .ok_or_else(|| VendureError::Refused("a line has no platform_variant_id".to_string()))?;
    let mut input = json!({
        "productVariantId": variant.as_str(),
        "quantity": line.quantity.unwrap_or(1),
    });
    let mut prices = Map::new();
    if let Some(price) = minor(line.price_per_item.as_ref(), currency, "price_per_item")? {
        prices.insert("mercerUnitPrice".to_string(), json!(price));
    }
    if let Some(discount) = minor(
        line.discount_per_item.as_ref(),
        currency,
        "discount_per_item",
    )? {
        prices.insert("mercerUnitDiscount".to_string(), json!(discount));
    }
    if !prices.is_empty() {
        input["customFields"] = Value::Object(prices);
    }
    Ok(input)
}

/// The shipping method that charges the shipping price Mercer set (the plugin makes it).
const MERCER_SHIPPING_CODE: &str = "mercer-subscription-shipping";

/// The shipping method to set: the plugin's, which charges the price sent, when the order was
/// sent with one (`priced`); else the one of that name, or else the cheapest eligible.
fn shipping_method(
    vendure: &Vendure,
    id: &str,
    name: Option<&str>,
    priced: bool,
) -> Result<String, VendureError> {
    #[derive(Deserialize)]
    struct Eligible {
        #[serde(rename = "eligibleShippingMethodsForDraftOrder")]
        methods: Vec<Method>,
    }
    #[derive(Deserialize)]
    struct Method {
        id: String,
        code: String,
        name: String,
        price: i64,
    }
    let Eligible { methods } = vendure.admin(
        "query($id: ID!) { eligibleShippingMethodsForDraftOrder(orderId: $id) { id code name price } }",
        json!({ "id": id }),
    )?;
    let chosen = match priced {
        true => methods.iter().find(|m| m.code == MERCER_SHIPPING_CODE),
        false => name
            .and_then(|name| methods.iter().find(|m| m.name.eq_ignore_ascii_case(name)))
            .or_else(|| {
                let others = methods.iter().filter(|m| m.code != MERCER_SHIPPING_CODE);
                others.min_by_key(|m| m.price)
            }),
    };
    chosen
        .map(|method| method.id.clone())
        .ok_or_else(|| VendureError::Refused("no shipping method can ship this order".to_string()))
}

fn add_note(vendure: &Vendure, id: &str, note: &str, public: bool) -> Result<(), VendureError> {
    vendure.admin::<Value>(
        "mutation($input: AddNoteToOrderInput!) { addNoteToOrder(input: $input) { id } }",
        json!({ "input": { "id": id, "note": note, "isPublic": public } }),
    )?;
    Ok(())
}

/// Update Order: notes become order notes, `test` and `custom_attributes` the order's custom
/// fields; fields Vendure computes (totals, states) are not changed by it.
pub fn update_order(vendure: &Vendure, id: &str, sent: &Order) -> Result<Order, VendureError> {
    let stored = order(vendure, id)?;
    let currency = stored
        .currency()
        .ok_or_else(|| VendureError::Unreachable("an unknown currency".to_string()))?;
    let fields = order_custom_fields(sent, &currency)?;
    if !fields.is_empty() {
        order_mutation(
            vendure,
            "setOrderCustomFields",
            "$input: UpdateOrderInput!",
            "input: $input",
            json!({ "input": { "id": id, "customFields": fields } }),
        )?;
    }
    let current = stored.to_order().unwrap_or_default();
    for (note, public, now) in [
        (&sent.notes, false, &current.notes),
        (&sent.public_notes, true, &current.public_notes),
    ] {
        if let Some(note) = note.as_deref()
            && now.as_deref() != Some(note)
        {
            add_note(vendure, id, note, public)?;
        }
    }
    get_order(vendure, id)
}

/// Create Payment: a manual payment, settled, with the gateway's name as its method.
pub fn create_payment(
    vendure: &Vendure,
    order_id: &str,
    sent: &Payment,
) -> Result<Payment, VendureError> {
    let stored = order(vendure, order_id)?;
    let method = sent
        .provider
        .clone()
        .or_else(|| sent.payment_method.clone())
        .unwrap_or_else(|| "mercer".to_string());
    let transaction = sent
        .transactions
        .iter()
        .flatten()
        .find_map(|transaction| transaction.provider_transaction_id.clone());
    let metadata = sent
        .custom_attributes
        .as_ref()
        .map(|attributes| json!(attributes))
        .unwrap_or_else(|| json!({}));
    let before: Vec<String> = stored
        .payments
        .iter()
        .flatten()
        .map(|p| p.id.clone())
        .collect();
    order_mutation(
        vendure,
        "addManualPaymentToOrder",
        "$input: ManualPaymentInput!",
        "input: $input",
        json!({ "input": {
            "orderId": order_id,
            "method": method,
            "transactionId": transaction,
            "metadata": metadata,
        } }),
    )?;
    let after = order(vendure, order_id)?;
    let currency = after
        .currency()
        .ok_or_else(|| VendureError::Unreachable("an unknown currency".to_string()))?;
    after
        .payments
        .iter()
        .flatten()
        .find(|payment| !before.contains(&payment.id))
        .map(|payment| payment.to_payment(&currency))
        .ok_or_else(|| VendureError::Unreachable("the payment is not on the order".to_string()))
}
