DROP INDEX product_variants_sku;
