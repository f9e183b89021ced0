//! The customer directory: the shop's customers as received from
//! its connector (and, later, those created in the service), searchable and paged, with their
//! addresses, labels and the customer groups the platform says they belong to.

use serde::Serialize;
use utoipa::ToSchema;

use super::DirectoryRepositories;
use crate::access::shop::Shop;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::filter::{
    Condition, MAX_FILTER_CONDITIONS, MAX_LISTED_IDS, gather, split_conditions,
};
pub use crate::kernel::filter::{FilterOp, FilterValue};
use crate::kernel::ids::{AddressId, CustomerGroupId, CustomerId, LabelId};
use crate::kernel::limits::{MAX_ID_CHARS, MAX_SEARCH_CHARS, check_parameter};
use crate::kernel::time::Timestamp;

/// The order of List Customers (`orderby`); ties fall back to the id, in the same direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(as = DirectoryOrderBy, rename_all = "snake_case")]
pub enum OrderBy {
    /// By id (`id`), the default.
    Id,
    /// By the time the service stored the customer (`created_at`).
    CreatedAt,
    /// By the time the service last changed the customer (`updated_at`).
    UpdatedAt,
    /// By email, ignoring ASCII case (`email`).
    Email,
    /// By first name, ignoring ASCII case (`first_name`).
    FirstName,
    /// By last name, ignoring ASCII case (`last_name`).
    LastName,
}

impl OrderBy {
    const NAMES: [(&'static str, OrderBy); 6] = [
        ("id", OrderBy::Id),
        ("created_at", OrderBy::CreatedAt),
        ("updated_at", OrderBy::UpdatedAt),
        ("email", OrderBy::Email),
        ("first_name", OrderBy::FirstName),
        ("last_name", OrderBy::LastName),
    ];

    fn parse(text: &str) -> Option<Self> {
        OrderBy::NAMES
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, order)| *order)
    }
}

/// The direction of List Customers' order (`orderdirection`, any case), as the API describes
/// it; the query keeps it as `descending`.
#[derive(ToSchema)]
#[schema(as = DirectoryOrderDirection, rename_all = "lowercase")]
pub enum OrderDirection {
    /// Ascending, the default.
    Asc,
    /// Descending.
    Desc,
}

/// Fields a filter may name, by the type of their values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterField {
    /// `id`: the customer's id (the service's integer); compared as an integer.
    Id,
    /// `created_at`: when the service stored the customer; compared as a time.
    CreatedAt,
    /// `updated_at`: when the service last changed the customer; compared as a time.
    UpdatedAt,
    /// `platform_created_at`: when the platform says it created the customer; a time.
    PlatformCreatedAt,
    /// `email`: text, matched with `eq` or `like`.
    Email,
    /// `first_name`: text, matched with `eq` or `like`.
    FirstName,
    /// `last_name`: text, matched with `eq` or `like`.
    LastName,
    /// `phone`: text, matched with `eq` or `like`.
    Phone,
    /// `platform_id`: the platform's id of the customer; text, matched with `eq` or `like`.
    PlatformId,
}

impl FilterField {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "id" => FilterField::Id,
            "created_at" => FilterField::CreatedAt,
            "updated_at" => FilterField::UpdatedAt,
            "platform_created_at" => FilterField::PlatformCreatedAt,
            "email" => FilterField::Email,
            "first_name" => FilterField::FirstName,
            "last_name" => FilterField::LastName,
            "phone" => FilterField::Phone,
            "platform_id" => FilterField::PlatformId,
            _ => return None,
        })
    }

    fn is_text(self) -> bool {
        matches!(
            self,
            FilterField::Email
                | FilterField::FirstName
                | FilterField::LastName
                | FilterField::Phone
                | FilterField::PlatformId
        )
    }
}

/// One condition of the `filter` parameter, such as `gt(id:5)`; a customer must meet them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// The field the condition tests.
    pub field: FilterField,
    /// How the field is compared with the value (`like` only for text fields).
    pub op: FilterOp,
    /// The value compared with, of the field's type.
    pub value: FilterValue,
}

/// A checked List Customers query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryQuery {
    /// Only customers whose id is greater than this (`since_id`).
    pub since_id: Option<CustomerId>,
    /// Only customers updated at or after this time (`updated_at_min`).
    pub updated_at_min: Option<Timestamp>,
    /// Only customers updated at or before this time (`updated_at_max`).
    pub updated_at_max: Option<Timestamp>,
    /// Matched, ignoring case, within email, first and last name and phone.
    pub search: Option<String>,
    /// Only customers with one of these ids (`ids`, comma-separated, repeatable).
    pub ids: Option<Vec<CustomerId>>,
    /// The order of the customers (`orderby`, by id when absent).
    pub order_by: OrderBy,
    /// Whether the order is descending (`orderdirection=desc`); ascending by default.
    pub descending: bool,
    /// The conditions of every `filter` parameter, all of which a customer must meet.
    pub filters: Vec<Filter>,
    /// Only customers with a live label of exactly this name (`label`).
    pub label: Option<String>,
    /// Customers per page, 1 to 250 (`limit`, [`DEFAULT_LIMIT`] when absent).
    pub limit: i64,
    /// The page asked for, from 1 (`page`).
    pub page: i64,
}

impl DirectoryQuery {
    /// How many matching customers come before the page asked for.
    pub fn offset(&self) -> i64 {
        (self.page - 1).saturating_mul(self.limit)
    }
}

/// Customers per page of List Customers when the query gives no `limit`.
pub const DEFAULT_LIMIT: i64 = 50;
pub(crate) const MAX_LIMIT: i64 = 250;

fn bad(field: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(field, "invalid_value", message)
}

fn parse_int(field: &str, text: &str) -> Result<i64, FieldError> {
    text.trim()
        .parse()
        .map_err(|_| bad(field, format!("{field} must be an integer")))
}

fn parse_time(field: &str, text: &str) -> Result<Timestamp, FieldError> {
    Timestamp::parse_rfc3339(text.trim()).ok_or_else(|| {
        bad(
            field,
            format!("{field} must be an RFC 3339 date-time such as 2024-03-01T10:30:00Z"),
        )
    })
}

/// Parses `op(field:value)` conditions joined by commas: `gt(id:5),like(email:%@example.test)`.
pub fn parse_filters(text: &str) -> Result<Vec<Filter>, FieldError> {
    let mut filters = Vec::new();
    for Condition {
        op,
        field: field_name,
        value,
    } in split_conditions(text, &FilterOp::ALL)?
    {
        let field = FilterField::parse(field_name)
            .ok_or_else(|| bad("filter", format!("unknown filter field {field_name:?}")))?;
        let value = if field.is_text() {
            if !matches!(op, FilterOp::Eq | FilterOp::Like) {
                return Err(bad("filter", format!("{field_name} takes eq or like")));
            }
            check_parameter("filter", value, MAX_SEARCH_CHARS)?;
            FilterValue::Text(value.to_string())
        } else if op == FilterOp::Like {
            return Err(bad(
                "filter",
                format!("like applies to text fields, not {field_name}"),
            ));
        } else if field == FilterField::Id {
            FilterValue::Integer(parse_int("filter", value)?)
        } else {
            FilterValue::Time(parse_time("filter", value)?)
        };
        filters.push(Filter { field, op, value });
    }
    Ok(filters)
}

/// Checks the query of List Customers; every problem is a 400 naming its parameter.
pub fn parse_directory_query(pairs: &[(String, String)]) -> Result<DirectoryQuery, DomainError> {
    let mut query = DirectoryQuery {
        since_id: None,
        updated_at_min: None,
        updated_at_max: None,
        search: None,
        ids: None,
        order_by: OrderBy::Id,
        descending: false,
        filters: Vec::new(),
        label: None,
        limit: DEFAULT_LIMIT,
        page: 1,
    };
    let mut problems = Vec::new();
    let mut check = |result: Result<(), FieldError>| {
        if let Err(problem) = result {
            problems.push(problem);
        }
    };
    for (key, value) in pairs {
        let key = key.strip_suffix("[]").unwrap_or(key);
        check((|| {
            match key {
                "since_id" => query.since_id = Some(CustomerId(parse_int(key, value)?)),
                "updated_at_min" => query.updated_at_min = Some(parse_time(key, value)?),
                "updated_at_max" => query.updated_at_max = Some(parse_time(key, value)?),
                "search" => {
                    check_parameter(key, value, MAX_SEARCH_CHARS)?;
                    query.search = Some(value.trim().to_string()).filter(|s| !s.is_empty())
                }
                "ids" => {
                    let ids = value
                        .split(',')
                        .filter(|id| !id.trim().is_empty())
                        .map(|id| parse_int(key, id).map(CustomerId))
                        .collect::<Result<Vec<_>, _>>()?;
                    let listed = query.ids.get_or_insert_with(Vec::new);
                    gather(key, "ids", MAX_LISTED_IDS, listed, ids)?;
                }
                "orderby" => {
                    query.order_by = OrderBy::parse(value.trim()).ok_or_else(|| {
                        bad(key, "orderby must be one of id, created_at, updated_at, email, first_name, last_name")
                    })?
                }
                "orderdirection" => {
                    query.descending = match value.trim().to_ascii_lowercase().as_str() {
                        "asc" => false,
                        "desc" => true,
                        _ => return Err(bad(key, "orderdirection must be asc or desc")),
                    }
                }
                "filter" => gather(
                    key,
                    "conditions",
                    MAX_FILTER_CONDITIONS,
                    &mut query.filters,
                    parse_filters(value)?,
                )?,
                "label" => {
                    check_parameter(key, value, MAX_ID_CHARS)?;
                    query.label = Some(value.trim().to_string()).filter(|s| !s.is_empty())
                }
                "limit" => {
                    let limit = parse_int(key, value)?;
                    if !(1..=MAX_LIMIT).contains(&limit) {
                        return Err(bad(key, format!("limit must be between 1 and {MAX_LIMIT}")));
                    }
                    query.limit = limit;
                }
                "page" => {
                    let page = parse_int(key, value)?;
                    if page < 1 {
                        return Err(bad(key, "page must be 1 or more"));
                    }
                    query.page = page;
                }
                _ => {}
            }
            Ok(())
        })());
    }
    if problems.is_empty() {
        Ok(query)
    } else {
        Err(DomainError::BadRequest(problems))
    }
}

/// A directory customer as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryCustomer {
    /// The customer's id (the service's integer).
    pub id: CustomerId,
    /// The platform's id of the customer; none for a customer the platform has not given one yet.
    pub platform_id: Option<String>,
    /// The customer's email; none when empty.
    pub email: Option<String>,
    /// The customer's first name; none when empty.
    pub first_name: Option<String>,
    /// The customer's last name; none when empty.
    pub last_name: Option<String>,
    /// The customer's phone number; none when empty.
    pub phone: Option<String>,
    /// When the platform says it created the customer, if it says.
    pub platform_created_at: Option<Timestamp>,
    /// When the service stored the customer.
    pub created_at: Timestamp,
    /// When the service last changed the customer.
    pub updated_at: Timestamp,
    /// When the customer was deleted; a deleted customer is not found nor listed.
    pub deleted_at: Option<Timestamp>,
}

/// An address of a directory customer as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryAddress {
    /// The address's id (the service's integer).
    pub id: AddressId,
    /// The id of the customer the address belongs to (the service's integer).
    pub customer_id: CustomerId,
    /// The platform's id of the address, if it has one.
    pub platform_id: Option<String>,
    /// The platform's id of the address's customer, if the customer has one.
    pub platform_customer_id: Option<String>,
    /// The first name on the address.
    pub first_name: Option<String>,
    /// The last name on the address.
    pub last_name: Option<String>,
    /// The company on the address.
    pub company: Option<String>,
    /// The phone number on the address.
    pub phone: Option<String>,
    /// The first street line.
    pub street_1: Option<String>,
    /// The second street line.
    pub street_2: Option<String>,
    /// The city.
    pub city: Option<String>,
    /// The province or state, by name.
    pub province: Option<String>,
    /// The province or state, by code.
    pub province_code: Option<String>,
    /// The postal code.
    pub zip: Option<String>,
    /// The country, by name.
    pub country: Option<String>,
    /// The country's code as the platform gives it, such as `US`.
    pub country_code: Option<String>,
    /// The kind of address as the platform gives it, such as `shipping` or `billing`.
    pub address_type: Option<String>,
    /// The address's use as the platform gives it.
    pub address_use: Option<String>,
    /// Whether this is the customer's default address.
    pub is_default: bool,
    /// When the service stored the address.
    pub created_at: Timestamp,
    /// When the service last changed the address.
    pub updated_at: Timestamp,
    /// When the address was deleted, if it was.
    pub deleted_at: Option<Timestamp>,
}

/// A label the shop put on a directory customer; customers can be listed by label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Label {
    /// The label's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: LabelId,
    /// The id of the labelled customer (the service's integer).
    #[schema(value_type = i64)]
    pub customer_id: CustomerId,
    /// The label's text, trimmed, at most 255 characters; unique among a customer's live labels.
    pub name: String,
    /// When the label was added.
    pub created_at: Timestamp,
    /// When the label last changed.
    pub updated_at: Timestamp,
    /// When the label was deleted; a deleted label is not shown and no longer matches `label`.
    pub deleted_at: Option<Timestamp>,
}

/// A customer group a directory customer belongs to, as stored: the group with the customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerGroupMembership {
    /// The id of the customer that belongs to the group (the service's integer).
    pub customer_id: CustomerId,
    /// The group's id (the service's integer).
    pub id: CustomerGroupId,
    /// The platform's id of the group.
    pub platform_id: String,
    /// The group's name, the newest the platform gave.
    pub name: String,
    /// When the service stored the group.
    pub created_at: Timestamp,
    /// When the service last changed the group (its name).
    pub updated_at: Timestamp,
}

/// A page of the directory, as the repository answers it.
#[derive(Debug, Clone, Default)]
pub struct DirectoryPage {
    /// The customers of the page, in the query's order.
    pub customers: Vec<DirectoryCustomer>,
    /// Customers that match the query, over every page.
    pub total: i64,
}

/// The platform id union of directory answers: the text, and its integer value when it is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct PlatformIdUnion {
    /// The platform's id as text (`""` when there is none).
    pub string_value: String,
    /// The id as an integer when the text is one, else 0.
    pub int64_value: i64,
}

impl PlatformIdUnion {
    fn of(id: Option<&str>) -> PlatformIdUnion {
        let text = id.unwrap_or_default();
        PlatformIdUnion {
            string_value: text.to_string(),
            int64_value: text.parse::<i64>().unwrap_or(0),
        }
    }
}

/// The nullable text of directory answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct NullableText {
    /// The text, `""` when there is none.
    pub value: String,
    /// Whether there is a text (false for none, so `""` and none can be told apart).
    pub valid: bool,
}

impl NullableText {
    fn of(text: Option<&str>) -> NullableText {
        NullableText {
            value: text.unwrap_or_default().to_string(),
            valid: text.is_some(),
        }
    }
}

/// A directory address as answers show it: absent text is `""`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct AddressResource {
    /// The address's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: AddressId,
    /// The id of the address's customer (the service's integer).
    #[schema(value_type = i64)]
    pub svc_customer_id: CustomerId,
    /// The identifier of the shop the customer belongs to.
    pub shop_identifier: String,
    /// The shop's platform type, as the shop records it.
    pub platform_type: String,
    /// The first name on the address.
    pub first_name: String,
    /// The last name on the address.
    pub last_name: String,
    /// The first street line.
    pub street_1: String,
    /// The city.
    pub city: String,
    /// The province or state, by name.
    pub province: String,
    /// The province or state, by code.
    pub province_code: String,
    /// The postal code.
    pub zip: String,
    /// The country, by name.
    pub country: String,
    /// The country's code as the platform gives it, such as `US`.
    pub country_iso2: String,
    /// The kind of address as the platform gives it, such as `shipping` or `billing`.
    pub address_type: String,
    /// The address's use as the platform gives it.
    pub address_use: String,
    /// Whether this is the customer's default address.
    pub is_default: bool,
    /// When the service stored the address.
    pub created_at: Timestamp,
    /// When the service last changed the address.
    pub updated_at: Timestamp,
    /// When the address was deleted, if it was.
    pub deleted_at: Option<Timestamp>,
    /// The platform's id of the address.
    pub platform_id: PlatformIdUnion,
    /// The platform's id of the address's customer.
    pub platform_customer_id: PlatformIdUnion,
    /// The company on the address, if any.
    pub company: NullableText,
    /// The second street line, if any.
    pub street_2: NullableText,
    /// The phone number on the address, if any.
    pub phone: NullableText,
}

fn text(field: &Option<String>) -> String {
    field.clone().unwrap_or_default()
}

pub(crate) fn address_resource(shop: &Shop, address: &DirectoryAddress) -> AddressResource {
    AddressResource {
        id: address.id,
        svc_customer_id: address.customer_id,
        shop_identifier: shop.identifier.as_str().to_string(),
        platform_type: shop.platform_type.clone(),
        first_name: text(&address.first_name),
        last_name: text(&address.last_name),
        street_1: text(&address.street_1),
        city: text(&address.city),
        province: text(&address.province),
        province_code: text(&address.province_code),
        zip: text(&address.zip),
        country: text(&address.country),
        country_iso2: text(&address.country_code),
        address_type: text(&address.address_type),
        address_use: text(&address.address_use),
        is_default: address.is_default,
        created_at: address.created_at,
        updated_at: address.updated_at,
        deleted_at: address.deleted_at,
        platform_id: PlatformIdUnion::of(address.platform_id.as_deref()),
        platform_customer_id: PlatformIdUnion::of(address.platform_customer_id.as_deref()),
        company: NullableText::of(address.company.as_deref()),
        street_2: NullableText::of(address.street_2.as_deref()),
        phone: NullableText::of(address.phone.as_deref()),
    }
}

/// A customer group a directory customer belongs to, as answers show it: the group's id, name
/// and platform id, and when the service stored and last changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = DirectoryCustomerGroup)]
pub struct CustomerGroupResource {
    /// The group's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: CustomerGroupId,
    /// The group's name, as the platform names it.
    pub name: String,
    /// The identifier of the shop the group belongs to.
    pub shop_identifier: String,
    /// The platform's id of the group.
    pub platform_id: String,
    /// When the service stored the group.
    pub created_at: Timestamp,
    /// When the service last changed the group.
    pub updated_at: Timestamp,
}

/// A directory customer as answers show it, with their addresses (the default one, else the
/// first, also as `default_address`), labels and customer groups. Customers of the directory
/// have no tags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct CustomerResource {
    /// The customer's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: CustomerId,
    /// The identifier of the shop the customer belongs to.
    pub shop_identifier: String,
    /// The shop's platform type, as the shop records it.
    pub platform_type: String,
    /// The customer's first name.
    pub first_name: String,
    /// The customer's last name.
    pub last_name: String,
    /// The customer's email.
    pub email: String,
    /// The customer's phone number.
    pub phone: String,
    /// Always `""`: directory customers have no tags.
    #[schema(value_type = String, max_length = 0)]
    pub tags: &'static str,
    /// When the service stored the customer.
    pub created_at: Timestamp,
    /// When the service last changed the customer.
    pub updated_at: Timestamp,
    /// When the customer was deleted; always none in answers, which show live customers only.
    pub deleted_at: Option<Timestamp>,
    /// When the platform says it created the customer, if it says.
    pub platform_created_at: Option<Timestamp>,
    /// The platform's id of the customer.
    pub platform_id: PlatformIdUnion,
    /// The customer's addresses.
    pub addresses: Vec<AddressResource>,
    /// The default address, else the first; none when the customer has no address.
    pub default_address: Option<AddressResource>,
    /// The customer's live labels.
    pub labels: Vec<Label>,
    /// The customer groups the platform says the customer belongs to, by name then platform id.
    pub groups: Vec<CustomerGroupResource>,
}

fn group_resource(shop: &Shop, group: &CustomerGroupMembership) -> CustomerGroupResource {
    CustomerGroupResource {
        id: group.id,
        name: group.name.clone(),
        shop_identifier: shop.identifier.as_str().to_string(),
        platform_id: group.platform_id.clone(),
        created_at: group.created_at,
        updated_at: group.updated_at,
    }
}

pub(crate) fn customer_resource(
    shop: &Shop,
    customer: &DirectoryCustomer,
    addresses: &[&DirectoryAddress],
    labels: &[&Label],
    groups: &[&CustomerGroupMembership],
) -> CustomerResource {
    let mut groups: Vec<CustomerGroupResource> = groups
        .iter()
        .map(|group| group_resource(shop, group))
        .collect();
    groups.sort_by(|a, b| (&a.name, &a.platform_id).cmp(&(&b.name, &b.platform_id)));
    let default = addresses
        .iter()
        .find(|address| address.is_default)
        .or(addresses.first())
        .map(|address| address_resource(shop, address));
    CustomerResource {
        id: customer.id,
        shop_identifier: shop.identifier.as_str().to_string(),
        platform_type: shop.platform_type.clone(),
        first_name: text(&customer.first_name),
        last_name: text(&customer.last_name),
        email: text(&customer.email),
        phone: text(&customer.phone),
        tags: "",
        created_at: customer.created_at,
        updated_at: customer.updated_at,
        deleted_at: customer.deleted_at,
        platform_created_at: customer.platform_created_at,
        platform_id: PlatformIdUnion::of(customer.platform_id.as_deref()),
        addresses: addresses
            .iter()
            .map(|address| address_resource(shop, address))
            .collect(),
        default_address: default,
        labels: labels.iter().map(|label| (*label).clone()).collect(),
        groups,
    }
}

/// Customers with their addresses, labels and groups, in the order given: one read of each
/// for all of them.
pub(crate) fn customer_resources(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    customers: &[DirectoryCustomer],
) -> Result<Vec<CustomerResource>, DomainError> {
    let ids: Vec<CustomerId> = customers.iter().map(|c| c.id).collect();
    let addresses = tx.addresses_of_customers(shop.id, &ids)?;
    let labels = tx.labels_of_customers(shop.id, &ids)?;
    let groups = tx.groups_of_customers(shop.id, &ids)?;
    Ok(customers
        .iter()
        .map(|customer| {
            let own_addresses: Vec<&DirectoryAddress> = addresses
                .iter()
                .filter(|a| a.customer_id == customer.id)
                .collect();
            let own_labels: Vec<&Label> = labels
                .iter()
                .filter(|l| l.customer_id == customer.id)
                .collect();
            let own_groups: Vec<&CustomerGroupMembership> = groups
                .iter()
                .filter(|g| g.customer_id == customer.id)
                .collect();
            customer_resource(shop, customer, &own_addresses, &own_labels, &own_groups)
        })
        .collect())
}

/// A page of List Customers: the customers, and where the page is among the pages (the route
/// turns page numbers into URLs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerList {
    /// The customers of the page, in the query's order.
    pub customers: Vec<CustomerResource>,
    /// Customers that match, over every page.
    pub total: i64,
    /// Customers per page: the query's limit.
    pub per_page: i64,
    /// The page asked for, from 1.
    pub current_page: i64,
    /// How many pages the matching customers fill (0 when none match).
    pub total_pages: i64,
    /// The page after this one, if it is not the last.
    pub next_page: Option<i64>,
    /// The page before this one (the last page when this one is past it); none on page 1.
    pub previous_page: Option<i64>,
}

/// List Customers: the page `query` asks for. A page past the last has no customers, and its
/// previous page is the last.
pub fn list_customers(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    query: &DirectoryQuery,
) -> Result<CustomerList, DomainError> {
    let page = tx.list_directory_customers(shop.id, query)?;
    let total_pages = (page.total + query.limit - 1) / query.limit;
    Ok(CustomerList {
        customers: customer_resources(tx, shop, &page.customers)?,
        total: page.total,
        per_page: query.limit,
        current_page: query.page,
        total_pages,
        next_page: (query.page < total_pages).then(|| query.page + 1),
        previous_page: (query.page > 1).then(|| (query.page - 1).min(total_pages.max(1))),
    })
}

/// Get Customer by ID.
pub fn get_customer(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    id: CustomerId,
) -> Result<CustomerResource, DomainError> {
    let customer = find_customer(tx, shop, id)?;
    one_resource(tx, shop, customer)
}

/// Get Customer by Platform ID.
pub fn get_customer_by_platform_id(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    platform_id: &str,
) -> Result<CustomerResource, DomainError> {
    let customer = find_customer_by_platform_id(tx, shop, platform_id)?;
    one_resource(tx, shop, customer)
}

fn one_resource(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    customer: DirectoryCustomer,
) -> Result<CustomerResource, DomainError> {
    customer_resources(tx, shop, &[customer])?
        .pop()
        .ok_or(DomainError::not_found("customer"))
}

/// List Customer Addresses: a live customer's addresses.
pub fn customer_addresses(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    customer_id: CustomerId,
) -> Result<Vec<AddressResource>, DomainError> {
    find_customer(tx, shop, customer_id)?;
    Ok(tx
        .addresses_of_customers(shop.id, &[customer_id])?
        .iter()
        .map(|address| address_resource(shop, address))
        .collect())
}

/// Get Customer Address by ID: one address of a live customer.
pub fn customer_address(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    address_id: AddressId,
) -> Result<AddressResource, DomainError> {
    find_customer(tx, shop, customer_id)?;
    tx.addresses_of_customers(shop.id, &[customer_id])?
        .iter()
        .find(|address| address.id == address_id)
        .map(|address| address_resource(shop, address))
        .ok_or(DomainError::not_found("address"))
}

/// One live directory customer of the shop, or NotFound.
pub(crate) fn find_customer(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    id: CustomerId,
) -> Result<DirectoryCustomer, DomainError> {
    tx.directory_customer(shop.id, id)?
        .filter(|customer| customer.deleted_at.is_none())
        .ok_or(DomainError::not_found("customer"))
}

pub(crate) fn find_customer_by_platform_id(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    platform_id: &str,
) -> Result<DirectoryCustomer, DomainError> {
    tx.directory_customer_by_platform_id(shop.id, platform_id)?
        .filter(|customer| customer.deleted_at.is_none())
        .ok_or(DomainError::not_found("customer"))
}

/// Adds a label to a customer; an existing live label of that name is returned as it is.
/// The bool is true when the label is new.
pub fn add_label(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    name: Option<&str>,
    now: Timestamp,
) -> Result<(Label, bool), DomainError> {
    let name = name.map(str::trim).unwrap_or_default();
    if name.is_empty() {
        return Err(DomainError::Invalid(vec![FieldError::required("name")]));
    }
    if name.chars().count() > 255 {
        return Err(DomainError::invalid(
            "name",
            "length",
            "name must be at most 255 characters",
        ));
    }
    find_customer(tx, shop, customer_id)?;
    if let Some(existing) = tx
        .labels_of_customers(shop.id, &[customer_id])?
        .into_iter()
        .find(|label| label.name == name)
    {
        return Ok((existing, false));
    }
    Ok((tx.insert_label(shop.id, customer_id, name, now)?, true))
}

/// Deletes a label of a live customer; NotFound when the customer or the label is not there.
pub fn delete_label(
    tx: &mut dyn DirectoryRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    label_id: LabelId,
    now: Timestamp,
) -> Result<(), DomainError> {
    find_customer(tx, shop, customer_id)?;
    if tx.delete_label(shop.id, customer_id, label_id, now)? {
        Ok(())
    } else {
        Err(DomainError::not_found("label"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_customers_groups_are_objects_with_their_ids_names_and_times() {
        let at = Timestamp::from_micros(1_700_000_000_000_000);
        let group = CustomerGroupResource {
            id: CustomerGroupId(7),
            name: "Wholesale".to_string(),
            shop_identifier: "demo".to_string(),
            platform_id: "12".to_string(),
            created_at: at,
            updated_at: at,
        };
        let value = serde_json::to_value(&group).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "created_at",
                "id",
                "name",
                "platform_id",
                "shop_identifier",
                "updated_at"
            ]
        );
        assert_eq!(value["id"], 7);
        assert_eq!(value["name"], "Wholesale");
        assert_eq!(value["platform_id"], "12");
        assert_eq!(value["created_at"], serde_json::to_value(at).unwrap());
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn refused(pairs: &[(String, String)]) -> FieldError {
        match parse_directory_query(pairs) {
            Err(DomainError::BadRequest(mut problems)) => problems.remove(0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn filters_and_ids_are_bounded_over_all_their_repeats() {
        let conditions = |n: usize| vec!["gt(id:1)"; n].join(",");
        let at_limit = conditions(MAX_FILTER_CONDITIONS);
        assert!(parse_directory_query(&pairs(&[("filter", &at_limit)])).is_ok());
        let problem = refused(&pairs(&[("filter", &at_limit), ("filter", "gt(id:2)")]));
        assert_eq!(
            (problem.field.as_str(), problem.code),
            ("filter", "too_many")
        );
        assert!(
            problem.message.contains("at most 100 conditions"),
            "{}",
            problem.message
        );
        let ids: Vec<String> = (0..=MAX_LISTED_IDS).map(|id| id.to_string()).collect();
        let problem = refused(&pairs(&[("ids", &ids.join(","))]));
        assert_eq!((problem.field.as_str(), problem.code), ("ids", "too_many"));
    }

    #[test]
    fn defaults() {
        let query = parse_directory_query(&[]).unwrap();
        assert_eq!(
            (query.limit, query.page, query.order_by, query.descending),
            (50, 1, OrderBy::Id, false)
        );
    }

    #[test]
    fn parses_every_parameter() {
        let query = parse_directory_query(&pairs(&[
            ("since_id", "10"),
            ("updated_at_min", "2024-01-01T00:00:00Z"),
            ("updated_at_max", "2024-12-31T23:59:59Z"),
            ("search", " ada "),
            ("ids", "1,2,3"),
            ("orderby", "email"),
            ("orderdirection", "DESC"),
            ("filter[]", "gt(id:5),like(email:%@example.test)"),
            ("filter", "lte(created_at:2024-06-01T00:00:00Z)"),
            ("label", "vip"),
            ("limit", "250"),
            ("page", "3"),
        ]))
        .unwrap();
        assert_eq!(query.since_id, Some(CustomerId(10)));
        assert_eq!(query.search.as_deref(), Some("ada"));
        assert_eq!(
            query.ids,
            Some(vec![CustomerId(1), CustomerId(2), CustomerId(3)])
        );
        assert_eq!((query.order_by, query.descending), (OrderBy::Email, true));
        assert_eq!(query.filters.len(), 3);
        assert_eq!(
            query.filters[1],
            Filter {
                field: FilterField::Email,
                op: FilterOp::Like,
                value: FilterValue::Text("%@example.test".into())
            }
        );
        assert_eq!(query.offset(), 500);
    }

    #[test]
    fn unknown_orderby_filter_field_or_operator_are_400() {
        for (key, value, needle) in [
            ("orderby", "shoe_size", "orderby"),
            ("filter", "gt(shoe_size:5)", "unknown filter field"),
            ("filter", "between(id:5)", "unknown operator"),
            ("filter", "like(id:5)", "text fields"),
            ("filter", "gt(email:a)", "eq or like"),
            ("filter", "gt(created_at:yesterday)", "RFC 3339"),
            ("filter", "gt(id:5) lt(id:9)", "commas"),
            ("limit", "0", "between 1 and 250"),
            ("limit", "251", "between 1 and 250"),
            ("page", "0", "1 or more"),
            ("since_id", "abc", "integer"),
            ("orderdirection", "up", "asc or desc"),
        ] {
            let Err(DomainError::BadRequest(problems)) =
                parse_directory_query(&pairs(&[(key, value)]))
            else {
                panic!("{key}={value} must be refused");
            };
            assert!(
                problems[0].message.contains(needle),
                "{key}={value}: {}",
                problems[0].message
            );
            assert_eq!(problems[0].field, key);
        }
    }

    #[test]
    fn nul_and_overlong_search_terms_are_400() {
        let long = "a".repeat(MAX_SEARCH_CHARS + 1);
        for (key, value, needle) in [
            ("search", "a\0".to_string(), "U+0000"),
            ("search", long.clone(), "256 characters"),
            ("filter", format!("like(email:{long})"), "256 characters"),
            ("filter", format!("eq(first_name:{long})"), "256 characters"),
            ("filter", "like(email:%\0%)".to_string(), "U+0000"),
            ("label", "v\0".to_string(), "U+0000"),
        ] {
            let Err(DomainError::BadRequest(problems)) =
                parse_directory_query(&pairs(&[(key, &value)]))
            else {
                panic!("{key}={value:?} must be refused");
            };
            assert_eq!(problems[0].field, key);
            assert!(
                problems[0].message.contains(needle),
                "{}",
                problems[0].message
            );
        }
        let longest = "a".repeat(MAX_SEARCH_CHARS);
        assert!(parse_directory_query(&pairs(&[("search", &longest)])).is_ok());
    }

    #[test]
    fn platform_id_union_carries_the_number_when_there_is_one() {
        let union = |id| serde_json::to_value(PlatformIdUnion::of(Some(id))).unwrap();
        assert_eq!(
            union("123"),
            serde_json::json!({"string_value": "123", "int64_value": 123})
        );
        assert_eq!(
            union("cus_1"),
            serde_json::json!({"string_value": "cus_1", "int64_value": 0})
        );
    }
}
