export * from './timing';
export * from './settings';
export * from './declaration';
export * from './environment';
