// The Mercer plugin for Vendure: forwards the shop's changes to the Mercer Vendure connector
// (`mercer-vendure`), and gives the connector what Vendure's Admin API lacks.
//
// Plain JavaScript, loadable from a Vendure config with no build step:
//
//     const { MercerPlugin } = require('<path>/crates/vendure/plugin');
//     plugins: [DefaultJobQueuePlugin, MercerPlugin]
//
// What it adds to Vendure:
// - custom fields: `Order.mercerIdempotencyKey` (the Idempotency-Key of the connector's Create
//   Order, so a retried call finds the first order), `Order.mercerTest` and
//   `Order.mercerAttributes` (an order's test flag and custom attributes, which Vendure has no
//   field for), `Address.provinceCode`, `OrderLine.mercerUnitPrice` (a price the connector sets
//   for a line, used instead of the variant's: a subscription's price), and internal global
//   settings: the connectors changes go to, each with the secret that signs its pushes and when
//   it last reconciled;
// - Admin API: `setMercerConnector(url, secret)` (the connector calls it when it starts;
//   several connectors may be set, each gets every change), `removeMercerConnector(url)`,
//   `mercerReconciledAt(url)` and `setMercerReconciledAt(url, at)` (where a connector's
//   reconcile pass goes on from),
//   `mercerIds(entity, after, take)` (ids in ascending order after a cursor, which Vendure's list
//   filters cannot express) and `mercerDeleted(entity, since)` (soft-deleted customers and
//   products, which Vendure's lists leave out);
// - a job queue, `mercer-forward`: every customer, address, customer group, order, payment,
//   product, variant and collection change becomes a job that POSTs `{entity, id, type, at}` to
//   `{connector}/vendure/events`, retried with backoff until the connector accepts it. A change
//   to an address, a group membership, a variant or a payment also touches its customer's,
//   product's or order's `updatedAt`, so that time orders every change and a reconcile pass that
//   lists by `updatedAt` sees it.
//
// A push that fails is retried; give the job queue `mercerBackoff` so the retries spread over
// hours (1 s, 2 s, 4 s… up to 10 minutes apart) rather than seconds, and let several pushes run
// at once (each carries the entity's current state and `updatedAt`, and Mercer keeps the newest):
//
//     DefaultJobQueuePlugin.init({
//         backoffStrategy: mercerBackoff,
//         concurrency: queue => (queue === 'mercer-forward' ? 8 : 1),
//     })
//
// A push is signed: `X-Mercer-Timestamp` (RFC 3339) and `X-Mercer-Signature`, base64 of
// HMAC-SHA256 keyed with the secret over the timestamp, a newline and the exact body.
'use strict';

require('reflect-metadata');
const crypto = require('crypto');
const { Args, Mutation, Query, Resolver } = require('@nestjs/graphql');
const { Injectable } = require('@nestjs/common');
const { parse } = require('graphql');
const core = require('@vendure/core');

const {
    Allow,
    Collection,
    CollectionEvent,
    CollectionModificationEvent,
    Customer,
    CustomerAddressEvent,
    CustomerEvent,
    CustomerGroupChangeEvent,
    EventBus,
    GlobalSettings,
    JobQueueService,
    Logger,
    Order,
    OrderEvent,
    OrderStateTransitionEvent,
    PaymentStateTransitionEvent,
    Permission,
    PluginCommonModule,
    Product,
    Promotion,
    PromotionCondition,
    RandomBytesApiKeyStrategy,
    PromotionItemAction,
    PromotionOrderAction,
    PromotionService,
    RequestContextService,
    ShippingCalculator,
    ShippingEligibilityChecker,
    ShippingMethod,
    ShippingMethodService,
    User,
    ConfigService,
    ProductEvent,
    ProductVariant,
    ProductVariantEvent,
    ProductVariantPriceEvent,
    TransactionalConnection,
    VendurePlugin,
} = core;

const LOG = 'MercerPlugin';
const QUEUE = 'mercer-forward';
// A push that fails is retried this many times, with Vendure's backoff, before it is given up
// (the connector's reconcile pass still delivers the change, late).
const PUSH_RETRIES = 25;
const PUSH_TIMEOUT_MS = 10000;

// The entities the connector pages through, with the rows each list leaves out.
const LISTED = {
    customer: { entity: Customer, where: 'e.deletedAt IS NULL' },
    product: { entity: Product, where: 'e.deletedAt IS NULL' },
    collection: { entity: Collection, where: 'e.isRoot = :no', params: { no: false } },
    // Placed orders and the connector's own (moved to ArrangingPayment); not carts or drafts.
    order: {
        entity: Order,
        where: 'e.state NOT IN (:...open)',
        params: { open: ['Created', 'AddingItems', 'Draft'] },
    },
};
const SOFT_DELETED = { customer: Customer, product: Product };

// The prices Mercer sets on the orders it creates: a subscription's list price per unit
// (`OrderLine.mercerUnitPrice`), its discount per unit (`OrderLine.mercerUnitDiscount`), the
// order's own discount (`Order.mercerOrderDiscount`) and its shipping price
// (`Order.mercerShippingPrice`), all in the currency's minor units. The discounts are a
// promotion's actions and the shipping a shipping method's calculator, so the order shows them as
// Vendure shows any discount and shipping; orders without these fields are priced as always.
const PRICING_PROMOTION = 'Mercer subscription pricing';
const SHIPPING_CODE = 'mercer-subscription-shipping';
const en = text => [{ languageCode: core.LanguageCode.en, value: text }];

// Vendure wants a condition on a promotion without a coupon: this one holds for the orders
// whose discounts Mercer set.
const mercerDiscounted = new PromotionCondition({
    code: 'mercer_discounted',
    description: en('Orders Mercer set discounts on'),
    args: {},
    check: (ctx, order) =>
        Number.isInteger(order.customFields && order.customFields.mercerOrderDiscount) ||
        (order.lines || []).some(line =>
            Number.isInteger(line.customFields && line.customFields.mercerUnitDiscount),
        ),
});

const lineDiscount = new PromotionItemAction({
    code: 'mercer_line_discount',
    description: en('The per-unit discount Mercer sets on a line'),
    args: {},
    execute: (ctx, line) => {
        const discount = line.customFields && line.customFields.mercerUnitDiscount;
        return Number.isInteger(discount) && discount > 0 ? -discount : 0;
    },
});

const orderDiscount = new PromotionOrderAction({
    code: 'mercer_order_discount',
    description: en('The order discount Mercer sets'),
    args: {},
    execute: (ctx, order) => {
        const discount = order.customFields && order.customFields.mercerOrderDiscount;
        return Number.isInteger(discount) && discount > 0 ? -discount : 0;
    },
});

const mercerShippingOnly = new ShippingEligibilityChecker({
    code: 'mercer-shipping-eligibility',
    description: en('Only orders whose shipping price Mercer set'),
    args: {},
    check: (ctx, order) => Number.isInteger(order.customFields && order.customFields.mercerShippingPrice),
});

const mercerShippingPrice = new ShippingCalculator({
    code: 'mercer-shipping-calculator',
    description: en('The shipping price Mercer set'),
    args: {},
    calculate: (ctx, order) => ({
        price: order.customFields.mercerShippingPrice,
        priceIncludesTax: true,
        taxRate: 0,
    }),
});

const schema = parse(`
    type MercerDeletion {
        id: ID!
        deletedAt: DateTime!
    }
    extend type Query {
        "Ids of the entity's listed rows after the cursor, ascending (entity: customer, product, collection, order)."
        mercerIds(entity: String!, after: ID, take: Int!): [ID!]!
        "Soft-deleted customers or products, deleted at or after since, oldest first."
        mercerDeleted(entity: String!, since: DateTime!, take: Int!): [MercerDeletion!]!
        "The URLs of the connectors changes are forwarded to."
        mercerConnectorUrls: [String!]!
        "When the reconcile pass of the connector at url last started; null before the first."
        mercerReconciledAt(url: String!): DateTime
    }
    extend type Mutation {
        "A connector the Mercer plugin forwards the shop's changes to, and the secret that signs them."
        setMercerConnector(url: String!, secret: String!): Boolean!
        "Stops forwarding changes to the connector at url."
        removeMercerConnector(url: String!): Boolean!
        "Records when the reconcile pass that the connector at url just ended started."
        setMercerReconciledAt(url: String!, at: DateTime!): Boolean!
    }
`);

// Decorators applied by hand: this file is plain JavaScript.
function decorateMethod(target, name, decorators, params) {
    const descriptor = Object.getOwnPropertyDescriptor(target.prototype, name);
    Reflect.decorate(decorators, target.prototype, name, descriptor);
    (params || []).forEach((decorator, index) => decorator(target.prototype, name, index));
}

function inject(target, dependencies) {
    Reflect.defineMetadata('design:paramtypes', dependencies, target);
    return Injectable()(target);
}

class MercerSettings {
    constructor(connection) {
        this.connection = connection;
    }

    async settings() {
        const repository = this.connection.rawConnection.getRepository(GlobalSettings);
        const [settings] = await repository.find({ take: 1 });
        return settings;
    }

    // The connectors changes are forwarded to: `[{url, secret, reconciledAt}]`. Several
    // connectors (a shop's staging and production Mercer, or tests) may share one Vendure.
    async connectors() {
        const settings = await this.settings();
        const text = settings && settings.customFields && settings.customFields.mercerConnectors;
        try {
            const list = JSON.parse(text || '[]');
            return Array.isArray(list) ? list : [];
        } catch (error) {
            return [];
        }
    }

    async saveConnectors(change) {
        const settings = await this.settings();
        if (!settings) {
            throw new Error('Vendure has no global settings yet');
        }
        const list = change(await this.connectors());
        settings.customFields = { ...settings.customFields, mercerConnectors: JSON.stringify(list) };
        await this.connection.rawConnection.getRepository(GlobalSettings).save(settings);
    }

    async connector(url) {
        return (await this.connectors()).find(connector => connector.url === url);
    }

    async setConnector(url, secret) {
        await this.saveConnectors(list => {
            const kept = list.find(connector => connector.url === url);
            const others = list.filter(connector => connector.url !== url);
            return others.concat([{ url, secret, reconciledAt: kept ? kept.reconciledAt : null }]);
        });
    }

    async removeConnector(url) {
        await this.saveConnectors(list => list.filter(connector => connector.url !== url));
    }

    async reconciledAt(url) {
        const connector = await this.connector(url);
        return connector && connector.reconciledAt ? new Date(connector.reconciledAt) : null;
    }

    async setReconciledAt(url, at) {
        await this.saveConnectors(list =>
            list.map(connector =>
                connector.url === url
                    ? { ...connector, reconciledAt: new Date(at).toISOString() }
                    : connector,
            ),
        );
    }

    // Moves `updatedAt` of these rows to now, so the change of a part (an address, a variant, a
    // payment) is a change of the whole that the connector reports with a true time.
    async touch(entity, ids) {
        const unique = [...new Set(ids.filter(id => id != null).map(String))];
        if (unique.length === 0) {
            return;
        }
        await this.connection.rawConnection
            .getRepository(entity)
            .createQueryBuilder()
            .update()
            .set({ updatedAt: new Date() })
            .whereInIds(unique)
            .execute();
    }
}
inject(MercerSettings, [TransactionalConnection]);

class MercerResolver {
    constructor(connection, settings) {
        this.connection = connection;
        this.settings = settings;
    }

    async mercerIds(args) {
        const listed = LISTED[args.entity];
        if (!listed) {
            throw new Error(`unknown entity ${args.entity}`);
        }
        const take = Math.max(1, Math.min(Number(args.take) || 1, 1000));
        const query = this.connection.rawConnection
            .getRepository(listed.entity)
            .createQueryBuilder('e')
            .select('e.id', 'id')
            .where(listed.where, listed.params || {});
        if (args.after != null && args.after !== '') {
            query.andWhere('e.id > :after', { after: Number(args.after) });
        }
        const rows = await query.orderBy('e.id', 'ASC').limit(take).getRawMany();
        return rows.map(row => String(row.id));
    }

    async mercerDeleted(args) {
        const entity = SOFT_DELETED[args.entity];
        if (!entity) {
            throw new Error(`unknown entity ${args.entity}`);
        }
        const take = Math.max(1, Math.min(Number(args.take) || 1, 1000));
        const rows = await this.connection.rawConnection
            .getRepository(entity)
            .createQueryBuilder('e')
            .select(['e.id', 'e.deletedAt'])
            .where('e.deletedAt IS NOT NULL')
            .andWhere('e.deletedAt >= :since', { since: new Date(args.since) })
            .orderBy('e.deletedAt', 'ASC')
            .addOrderBy('e.id', 'ASC')
            .take(take)
            .getMany();
        return rows.map(row => ({ id: String(row.id), deletedAt: row.deletedAt }));
    }

    async mercerConnectorUrls() {
        return (await this.settings.connectors()).map(connector => connector.url);
    }

    async mercerReconciledAt(args) {
        return this.settings.reconciledAt(normalUrl(args.url));
    }

    async setMercerReconciledAt(args) {
        await this.settings.setReconciledAt(normalUrl(args.url), args.at);
        return true;
    }

    async removeMercerConnector(args) {
        await this.settings.removeConnector(normalUrl(args.url));
        return true;
    }

    async setMercerConnector(args) {
        let url;
        try {
            url = new URL(args.url);
        } catch (error) {
            throw new Error('url is not a URL');
        }
        if (url.protocol !== 'http:' && url.protocol !== 'https:') {
            throw new Error('url must be http or https');
        }
        if (!args.secret) {
            throw new Error('secret is empty');
        }
        await this.settings.setConnector(normalUrl(args.url), args.secret);
        Logger.info(`Forwarding changes to ${url.origin}`, LOG);
        return true;
    }
}
inject(MercerResolver, [TransactionalConnection, MercerSettings]);
Resolver()(MercerResolver);
decorateMethod(MercerResolver, 'mercerIds', [Query(), Allow(Permission.ReadCustomer)], [Args()]);
decorateMethod(
    MercerResolver,
    'mercerDeleted',
    [Query(), Allow(Permission.ReadCustomer)],
    [Args()],
);
decorateMethod(MercerResolver, 'mercerConnectorUrls', [Query(), Allow(Permission.ReadSettings)]);
decorateMethod(
    MercerResolver,
    'mercerReconciledAt',
    [Query(), Allow(Permission.ReadSettings)],
    [Args()],
);
decorateMethod(
    MercerResolver,
    'removeMercerConnector',
    [Mutation(), Allow(Permission.UpdateGlobalSettings)],
    [Args()],
);
decorateMethod(
    MercerResolver,
    'setMercerReconciledAt',
    [Mutation(), Allow(Permission.UpdateSettings)],
    [Args()],
);
decorateMethod(
    MercerResolver,
    'setMercerConnector',
    [Mutation(), Allow(Permission.UpdateGlobalSettings)],
    [Args()],
);

function normalUrl(url) {
    return String(url).replace(/\/+$/, '');
}

function sign(secret, timestamp, body) {
    return crypto.createHmac('sha256', secret).update(`${timestamp}\n${body}`).digest('base64');
}

// Makes the promotion and the shipping method that carry Mercer's prices, once.
class MercerPricing {
    constructor(connection, contexts, promotions, shippingMethods, configService) {
        this.connection = connection;
        this.contexts = contexts;
        this.promotions = promotions;
        this.shippingMethods = shippingMethods;
        this.configService = configService;
    }

    async onApplicationBootstrap() {
        try {
            await this.ensure();
        } catch (error) {
            Logger.error(`Could not set up Mercer's pricing: ${error.message}`, LOG);
        }
    }

    async ensure() {
        const identifier = this.configService.authOptions.superadminCredentials.identifier;
        const user = await this.connection.rawConnection.getRepository(User).findOne({
            where: { identifier },
            relations: { roles: { channels: true } },
        });
        const ctx = await this.contexts.create({ apiType: 'admin', user: user || undefined });
        const promotions = this.connection.rawConnection.getRepository(Promotion);
        const named = await promotions
            .createQueryBuilder('p')
            .leftJoin('p.translations', 't')
            .where('t.name = :name', { name: PRICING_PROMOTION })
            .andWhere('p.deletedAt IS NULL')
            .getCount();
        if (named === 0) {
            const made = await this.promotions.createPromotion(ctx, {
                enabled: true,
                conditions: [{ code: mercerDiscounted.code, arguments: [] }],
                actions: [
                    { code: lineDiscount.code, arguments: [] },
                    { code: orderDiscount.code, arguments: [] },
                ],
                translations: [{ languageCode: core.LanguageCode.en, name: PRICING_PROMOTION }],
            });
            if (made.errorCode) {
                throw new Error(`${made.errorCode}: ${made.message}`);
            }
        }
        const methods = this.connection.rawConnection.getRepository(ShippingMethod);
        const method = await methods.findOne({ where: { code: SHIPPING_CODE } });
        if (!method) {
            await this.shippingMethods.create(ctx, {
                code: SHIPPING_CODE,
                fulfillmentHandler: 'manual-fulfillment',
                checker: { code: mercerShippingOnly.code, arguments: [] },
                calculator: { code: mercerShippingPrice.code, arguments: [] },
                translations: [
                    {
                        languageCode: core.LanguageCode.en,
                        name: 'Subscription shipping',
                        description: 'The shipping price of a subscription, set by Mercer',
                    },
                ],
            });
        }
    }
}
inject(MercerPricing, [
    TransactionalConnection,
    RequestContextService,
    PromotionService,
    ShippingMethodService,
    ConfigService,
]);

class MercerForwarder {
    constructor(eventBus, jobQueueService, settings) {
        this.eventBus = eventBus;
        this.jobQueueService = jobQueueService;
        this.settings = settings;
    }

    async onApplicationBootstrap() {
        this.queue = await this.jobQueueService.createQueue({
            name: QUEUE,
            process: job => this.push(job.data),
        });
        const on = (type, handler) =>
            this.eventBus.ofType(type).subscribe(event => {
                handler(event).catch(error =>
                    Logger.error(`Could not queue a change: ${error.message}`, LOG),
                );
            });
        on(CustomerEvent, event => this.forward('customer', [event.entity.id], event.type));
        on(CustomerAddressEvent, async event => {
            const customerId = customerOfAddress(event.entity);
            await this.settings.touch(Customer, [customerId]);
            await this.forward('customer', [customerId], 'updated');
        });
        on(CustomerGroupChangeEvent, async event => {
            const ids = (event.customers || []).map(customer => customer.id);
            await this.settings.touch(Customer, ids);
            await this.forward('customer', ids, 'updated');
        });
        on(OrderEvent, event => this.forward('order', [event.entity.id], event.type));
        on(OrderStateTransitionEvent, event => this.forward('order', [event.order.id], 'updated'));
        on(PaymentStateTransitionEvent, async event => {
            await this.settings.touch(Order, [event.order.id]);
            await this.forward('order', [event.order.id], 'updated');
        });
        on(ProductEvent, event => this.forward('product', [event.entity.id], event.type));
        const variantsChanged = async event => {
            const variants = [].concat(event.entity || []);
            const ids = variants.map(variant => variant.productId);
            await this.settings.touch(Product, ids);
            await this.forward('product', ids, 'updated');
        };
        on(ProductVariantEvent, variantsChanged);
        on(ProductVariantPriceEvent, variantsChanged);
        on(CollectionEvent, event => this.forward('collection', [event.entity.id], event.type));
        on(CollectionModificationEvent, async event => {
            const products = await this.productsOfVariants(event.productVariantIds || []);
            await this.settings.touch(Product, products);
            await this.forward('product', products, 'updated');
        });
    }

    async productsOfVariants(variantIds) {
        if (variantIds.length === 0) {
            return [];
        }
        const rows = await this.settings.connection.rawConnection
            .getRepository(ProductVariant)
            .createQueryBuilder('v')
            .select('v.productId', 'productId')
            .whereInIds(variantIds)
            .getRawMany();
        return rows.map(row => row.productId);
    }

    async forward(entity, ids, type) {
        const at = new Date().toISOString();
        const unique = [...new Set(ids.filter(id => id != null).map(String))];
        const connectors = await this.settings.connectors();
        for (const id of unique) {
            for (const connector of connectors) {
                await this.queue.add(
                    { entity, id, type, at, connector: connector.url },
                    { retries: PUSH_RETRIES },
                );
            }
        }
    }

    // One change to one connector. A connector removed since is not an error: nothing is sent.
    async push(job) {
        const { connector: url, ...change } = job;
        const connector = await this.settings.connector(url);
        if (!connector) {
            return 'the connector was removed';
        }
        const body = JSON.stringify(change);
        const timestamp = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
        const controller = new AbortController();
        const timer = setTimeout(() => controller.abort(), PUSH_TIMEOUT_MS);
        try {
            const response = await fetch(`${connector.url}/vendure/events`, {
                method: 'POST',
                headers: {
                    'content-type': 'application/json',
                    'x-mercer-timestamp': timestamp,
                    'x-mercer-signature': sign(connector.secret, timestamp, body),
                },
                body,
                signal: controller.signal,
            });
            if (!response.ok) {
                throw new Error(`the connector answered ${response.status}`);
            }
            return `pushed ${change.entity} ${change.id}`;
        } finally {
            clearTimeout(timer);
        }
    }
}
inject(MercerForwarder, [EventBus, JobQueueService, MercerSettings]);

function customerOfAddress(address) {
    if (address.customer && address.customer.id != null) {
        return address.customer.id;
    }
    return address.customerId;
}

class MercerPlugin {}
VendurePlugin({
    imports: [PluginCommonModule],
    providers: [MercerSettings, MercerForwarder, MercerPricing],
    adminApiExtensions: { schema, resolvers: [MercerResolver] },
    compatibility: '^3.0.0',
    configuration: config => {
        const fields = config.customFields;
        fields.Order = (fields.Order || []).concat([
            {
                name: 'mercerIdempotencyKey',
                type: 'string',
                nullable: true,
                public: false,
                label: [{ languageCode: core.LanguageCode.en, value: 'Mercer idempotency key' }],
            },
        ]);
        fields.Order = fields.Order.concat([
            {
                name: 'mercerTest',
                type: 'boolean',
                nullable: true,
                public: false,
                label: [{ languageCode: core.LanguageCode.en, value: 'Test order' }],
            },
            {
                name: 'mercerOrderDiscount',
                type: 'int',
                nullable: true,
                public: false,
                label: en('Mercer order discount'),
            },
            {
                name: 'mercerShippingPrice',
                type: 'int',
                nullable: true,
                public: false,
                label: en('Mercer shipping price'),
            },
            {
                name: 'mercerAttributes',
                type: 'text',
                nullable: true,
                public: false,
                label: [{ languageCode: core.LanguageCode.en, value: 'Mercer custom attributes' }],
            },
        ]);
        fields.Address = (fields.Address || []).concat([
            {
                name: 'provinceCode',
                type: 'string',
                nullable: true,
                label: [{ languageCode: core.LanguageCode.en, value: 'Province code' }],
            },
        ]);
        fields.OrderLine = (fields.OrderLine || []).concat([
            {
                name: 'mercerUnitPrice',
                type: 'int',
                nullable: true,
                public: false,
                label: [{ languageCode: core.LanguageCode.en, value: 'Mercer unit price' }],
            },
            {
                name: 'mercerUnitDiscount',
                type: 'int',
                nullable: true,
                public: false,
                label: en('Mercer unit discount'),
            },
        ]);
        fields.GlobalSettings = (fields.GlobalSettings || []).concat([
            { name: 'mercerConnectors', type: 'text', nullable: true, internal: true },
        ]);
        config.promotionOptions.promotionConditions = (
            config.promotionOptions.promotionConditions || []
        ).concat([mercerDiscounted]);
        config.promotionOptions.promotionActions = (
            config.promotionOptions.promotionActions || []
        ).concat([lineDiscount, orderDiscount]);
        config.shippingOptions.shippingEligibilityCheckers = (
            config.shippingOptions.shippingEligibilityCheckers || []
        ).concat([mercerShippingOnly]);
        config.shippingOptions.shippingCalculators = (
            config.shippingOptions.shippingCalculators || []
        ).concat([mercerShippingPrice]);
        config.orderOptions.orderItemPriceCalculationStrategy = new MercerPriceStrategy(
            config.orderOptions.orderItemPriceCalculationStrategy,
        );
        return config;
    },
})(MercerPlugin);

// A line's unit price: the connector's `mercerUnitPrice` when it set one (a subscription's own
// price), otherwise what Vendure would charge.
class MercerPriceStrategy {
    constructor(fallback) {
        this.fallback = fallback;
    }

    init(injector) {
        if (this.fallback && typeof this.fallback.init === 'function') {
            return this.fallback.init(injector);
        }
    }

    calculateUnitPrice(ctx, productVariant, orderLineCustomFields, order, quantity) {
        const price = orderLineCustomFields && orderLineCustomFields.mercerUnitPrice;
        if (Number.isInteger(price) && price >= 0) {
            // What Mercer charges is what the customer pays: any tax Vendure's zones apply is
            // inside it, not added to it.
            return { price, priceIncludesTax: true };
        }
        return this.fallback.calculateUnitPrice(
            ctx,
            productVariant,
            orderLineCustomFields,
            order,
            quantity,
        );
    }
}

// The wait before a push's next attempt: doubling from 1 s, at most 10 minutes. Other queues
// keep Vendure's default of 1 s.
function mercerBackoff(queueName, attemptsMade) {
    if (queueName !== QUEUE) {
        return 1000;
    }
    return Math.min(1000 * 2 ** Math.max(0, attemptsMade - 1), 10 * 60 * 1000);
}

// An Admin API key check that costs microseconds. Vendure's default checks a key with bcrypt
// (12 rounds, about 270 ms of CPU) on every request, which caps a connector at a few calls a
// second. A key is 32 random bytes: a SHA-256 of it is as safe to keep as a bcrypt hash, as with
// any high-entropy token. Set it before making keys (a key made under bcrypt does not check):
//
//     authOptions: { adminApiKeyStrategy: mercerApiKeyStrategy() }
function mercerApiKeyStrategy() {
    const digest = text => crypto.createHash('sha256').update(text).digest('hex');
    return new RandomBytesApiKeyStrategy({
        hashingStrategy: {
            hash: async plaintext => `sha256:${digest(plaintext)}`,
            check: async (plaintext, hash) => {
                const expected = Buffer.from(`sha256:${digest(plaintext)}`);
                const given = Buffer.from(String(hash));
                return expected.length === given.length && crypto.timingSafeEqual(expected, given);
            },
        },
        // When the key was last used is written once a minute at most, not on every call.
        lastUsedAtUpdateInterval: 60 * 1000,
    });
}

module.exports = { MercerPlugin, mercerApiKeyStrategy, mercerBackoff, sign };
