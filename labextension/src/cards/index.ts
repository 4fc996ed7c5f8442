/**
 * The panel's cards: one per GPU, and one for the host. They only render what the model holds.
 */
export type { IRenderContext } from './common';
export { DeviceCard } from './device';
export { HostCard } from './host';
