export * from './state';
export * from './codec';
