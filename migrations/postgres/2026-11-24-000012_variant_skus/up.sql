-- addLineItem by SKU alone (docs/checkout.md): the shop's variants of a SKU.
CREATE INDEX product_variants_sku ON product_variants (shop_id, sku);
