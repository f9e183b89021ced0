// A Vendure for development and tests, with the Mercer plugin: `cargo xtask vendure` runs it.
//
//     node start.js --port 3000 --data DIR [--database sqlite|postgres] [--postgres-url URL]
//                   [--quiet] [--exit-with-parent PID]
//
// The first start seeds it (a channel in US dollars, a tax zone, two shipping methods, a
// payment method, products with variants in three collections, a customer with a Shop API
// password) and makes an Admin API key; every start then prints, once Vendure answers:
//
//     Admin API: http://127.0.0.1:3000/admin-api
//     API key: ...
//     Customer: EMAIL password: PASSWORD
//
// Vendure's telemetry is off: these machines reach no outside host.
'use strict';

process.env.VENDURE_DISABLE_TELEMETRY = 'true';

const fs = require('fs');
const path = require('path');
const {
    bootstrap,
    DefaultJobQueuePlugin,
    dummyPaymentHandler,
    JobQueueService,
    LogLevel,
    DefaultLogger,
} = require('@vendure/core');
const { populate } = require('@vendure/core/cli');
const { MercerPlugin, mercerApiKeyStrategy, mercerBackoff } = require('../plugin');

const SUPERADMIN = { identifier: 'superadmin', password: 'superadmin' };
const CUSTOMER = {
    emailAddress: 'ada@example.com',
    firstName: 'Ada',
    lastName: 'Lovelace',
    password: 'subscriber-password',
};

function options() {
    const args = process.argv.slice(2);
    const value = (name, fallback) => {
        const at = args.indexOf(`--${name}`);
        return at >= 0 && at + 1 < args.length ? args[at + 1] : fallback;
    };
    const data = value('data');
    if (!data) {
        throw new Error('--data DIR is required');
    }
    return {
        port: Number(value('port', '3000')),
        data: path.resolve(data),
        database: value('database', 'sqlite'),
        postgresUrl: value('postgres-url', 'postgres://postgres@127.0.0.1:5432/vendure'),
        quiet: args.includes('--quiet'),
        parent: Number(value('exit-with-parent', '0')),
    };
}

function database(opts) {
    if (opts.database === 'postgres') {
        const url = new URL(opts.postgresUrl);
        return {
            type: 'postgres',
            host: url.hostname,
            port: Number(url.port || 5432),
            username: decodeURIComponent(url.username || 'postgres'),
            password: decodeURIComponent(url.password || ''),
            database: url.pathname.replace(/^\//, ''),
            synchronize: true,
        };
    }
    if (opts.database !== 'sqlite') {
        throw new Error(`--database is sqlite or postgres, not ${opts.database}`);
    }
    return {
        type: 'sqljs',
        location: path.join(opts.data, 'vendure.sqlite'),
        autoSave: true,
        synchronize: true,
    };
}

// Makes the PostgreSQL database: a new one for a Vendure that is to be seeded (a data directory
// without an API key), else the one there, made if missing.
async function preparePostgresDatabase(opts, fresh) {
    const { Client } = require('pg');
    const url = new URL(opts.postgresUrl);
    const name = url.pathname.replace(/^\//, '');
    const quoted = `"${name.replace(/"/g, '""')}"`;
    url.pathname = '/postgres';
    const client = new Client({ connectionString: url.toString() });
    await client.connect();
    try {
        if (fresh) {
            await client.query(`DROP DATABASE IF EXISTS ${quoted} WITH (FORCE)`);
        }
        const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (found.rowCount === 0) {
            await client.query(`CREATE DATABASE ${quoted}`);
        }
    } finally {
        await client.end();
    }
}

function config(opts) {
    return {
        apiOptions: {
            port: opts.port,
            hostname: '127.0.0.1',
            adminApiPath: 'admin-api',
            shopApiPath: 'shop-api',
        },
        authOptions: {
            tokenMethod: ['bearer', 'api-key'],
            adminApiKeyStrategy: mercerApiKeyStrategy(),
            superadminCredentials: SUPERADMIN,
            requireVerification: false,
        },
        dbConnectionOptions: database(opts),
        paymentOptions: { paymentMethodHandlers: [dummyPaymentHandler] },
        logger: new DefaultLogger({ level: opts.quiet ? LogLevel.Warn : LogLevel.Info }),
        plugins: [
            DefaultJobQueuePlugin.init({
                pollInterval: 100,
                backoffStrategy: mercerBackoff,
                concurrency: queue => (queue === 'mercer-forward' ? 8 : 1),
            }),
            MercerPlugin,
        ],
    };
}

async function graphql(port, query, variables, headers) {
    const response = await fetch(`http://127.0.0.1:${port}/admin-api`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ query, variables }),
    });
    const body = await response.json();
    if (body.errors) {
        throw new Error(JSON.stringify(body.errors));
    }
    return { body: body.data, token: response.headers.get('vendure-auth-token') };
}

// Signs in as the superadmin, makes an API key with the superadmin role and the seed customer.
async function seedAccess(port) {
    const login = await graphql(
        port,
        `mutation($u: String!, $p: String!) { login(username: $u, password: $p) { __typename } }`,
        { u: SUPERADMIN.identifier, p: SUPERADMIN.password },
    );
    const auth = { authorization: `Bearer ${login.token}` };
    const roles = await graphql(port, '{ roles { items { id code } } }', {}, auth);
    const superadmin = roles.body.roles.items.find(role => role.code === '__super_admin_role__');
    const key = await graphql(
        port,
        `mutation($roles: [ID!]!) {
            createApiKey(input: {roleIds: $roles, translations: [{languageCode: en, name: "mercer-vendure"}]}) { apiKey }
        }`,
        { roles: [superadmin.id] },
        auth,
    );
    const { password, ...customer } = CUSTOMER;
    await graphql(
        port,
        `mutation($input: CreateCustomerInput!, $password: String) {
            createCustomer(input: $input, password: $password) { __typename }
        }`,
        { input: customer, password },
        auth,
    );
    return key.body.createApiKey.apiKey;
}

async function main() {
    const opts = options();
    fs.mkdirSync(opts.data, { recursive: true });
    const keyFile = path.join(opts.data, 'api-key');
    const seeded = fs.existsSync(keyFile);
    if (opts.database === 'postgres') {
        await preparePostgresDatabase(opts, !seeded);
    }
    const vendureConfig = config(opts);
    let app;
    if (seeded) {
        app = await bootstrap(vendureConfig);
    } else {
        app = await populate(
            () => bootstrap(vendureConfig),
            require('./initial-data.json'),
            path.join(__dirname, 'products.csv'),
        );
    }
    await app.get(JobQueueService).start();
    if (!seeded) {
        fs.writeFileSync(keyFile, await seedAccess(opts.port), { mode: 0o600 });
    }
    const key = fs.readFileSync(keyFile, 'utf8').trim();
    process.stdout.write(
        `Admin API: http://127.0.0.1:${opts.port}/admin-api\n` +
            `API key: ${key}\n` +
            `Customer: ${CUSTOMER.emailAddress} password: ${CUSTOMER.password}\n`,
    );
    let stopping = false;
    const stop = async () => {
        if (stopping) {
            return;
        }
        stopping = true;
        await app.close();
        process.exit(0);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    // The process that started us may close our output before we stop (a test run that
    // ended): the last log lines go nowhere then, and that is no reason to crash.
    for (const stream of [process.stdout, process.stderr]) {
        stream.on('error', error => {
            if (error.code === 'EPIPE') {
                stop();
            }
        });
    }
    if (opts.parent > 0) {
        // Tests share one Vendure for their whole run: it goes when the test process does.
        setInterval(() => {
            try {
                process.kill(opts.parent, 0);
            } catch (error) {
                stop();
            }
        }, 1000).unref();
    }
}

main().catch(error => {
    process.stderr.write(`${error.stack || error}\n`);
    process.exit(1);
});
