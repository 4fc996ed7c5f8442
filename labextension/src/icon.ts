/**
 * The monitor's icon: a graphics card seen from the side (its bracket, a board with a fan, the
 * slot's contacts), not a chip with pins, which reads as JupyterLab's kernel. Drawn in the
 * theme's icon colour (`jp-icon3`), so it follows light and dark themes.
 */
import { LabIcon } from '@jupyterlab/ui-components';

const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M1 4h2.2v16H1z"/>
    <path fill-rule="evenodd" d="M3.2 6h18.3A1.5 1.5 0 0 1 23 7.5v8a1.5 1.5 0 0 1-1.5 1.5H3.2zM5.4 8.5v6h1.3v-6zM8.1 8.5v6h1.3v-6zM19.9 11.5a4 4 0 1 0-8 0a4 4 0 1 0 8 0z"/>
    <circle cx="15.9" cy="11.5" r="1.8"/>
    <path d="M6 17h10v2.4H6z"/>
  </g>
</svg>`;

export const gpuIcon = new LabIcon({ name: 'jupyter-gpu:gpu', svgstr: svg });
