//! The shop's catalogue, as Product Saved events left it: a variant looked up by its platform
//! id, with its product (the headless checkout prices its line items from it).

use crate::kernel::ids::ShopId;
use std::collections::HashMap;

use crate::kernel::error::{DomainError, StorageError};
use crate::platform::PlatformRepositories;
use crate::platform::events::{EntityDocument, EntityKind};
use crate::platform::resources::{Product, Variant};

/// A variant of a live product.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogueVariant {
    /// The live product the variant belongs to, as its last Product Saved event left it.
    pub product: Product,
    /// The variant itself, out of the product's `variants`.
    pub variant: Variant,
}

impl CatalogueVariant {
    /// The variant's image, else the product's first.
    pub fn image_url(&self) -> Option<String> {
        self.variant
            .image_url
            .clone()
            .filter(|url| !url.is_empty())
            .or_else(|| {
                self.product
                    .images
                    .iter()
                    .flatten()
                    .find_map(|image| image.src.clone())
            })
    }
}

/// The live variants of these platform ids, by id; unknown ones are left out.
pub fn variants(
    tx: &mut dyn PlatformRepositories,
    shop_id: ShopId,
    variant_ids: &[&str],
) -> Result<HashMap<String, CatalogueVariant>, DomainError> {
    let mut found = HashMap::new();
    for (variant_id, record) in tx.products_of_variants(shop_id, variant_ids)? {
        let Some(json) = &record.document else {
            continue;
        };
        let Ok(EntityDocument::Product(product)) = EntityDocument::parse(EntityKind::Product, json)
        else {
            return Err(DomainError::Storage(StorageError::other(format!(
                "product {} of variant {variant_id} does not read",
                record.id
            ))));
        };
        let variant = product
            .variants
            .iter()
            .flatten()
            .find(|v| v.platform_id.as_ref().map(|id| id.as_str()) == Some(variant_id.as_str()))
            .cloned();
        if let Some(variant) = variant {
            found.insert(
                variant_id,
                CatalogueVariant {
                    product: *product,
                    variant,
                },
            );
        }
    }
    Ok(found)
}
