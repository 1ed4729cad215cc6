export * from './timing';
export * from './settings';
