import { purgeStatsSuite } from './purge-stats-suite.ts';

purgeStatsSuite('redis-cluster');
