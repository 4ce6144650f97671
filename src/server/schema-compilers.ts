import { createRequire } from 'node:module';
import type { ValidatorFactory } from '@fastify/ajv-compiler';
import type { SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/**
 * fastify's schema compilers, loaded the first time a route with a schema is compiled. No route here has one
 * (bodies are decoded and validated by the registry), yet fastify loads both, with ajv and fast-json-stringify,
 * when an instance is made unless it is given its own: ~10 ms of a `sim serve` start. They are fastify's own
 * dependencies, so they are resolved from where fastify is.
 */
const fastifyRequire = createRequire(createRequire(import.meta.url).resolve('fastify'));

export const LAZY_SCHEMA_COMPILERS: { buildValidator: ValidatorFactory; buildSerializer: SerializerFactory } = {
  buildValidator: (...args) => (fastifyRequire('@fastify/ajv-compiler') as () => ValidatorFactory)()(...args),
  buildSerializer: (...args) =>
    (fastifyRequire('@fastify/fast-json-stringify-compiler') as () => SerializerFactory)()(...args),
};
