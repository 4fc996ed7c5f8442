/** The monitor's icon: a chip with pins, drawn in the theme's icon colour (jp-icon3). */
import { LabIcon } from '@jupyterlab/ui-components';

const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M8 1.5h1.6v3H8zM11.2 1.5h1.6v3h-1.6zM14.4 1.5H16v3h-1.6zM8 19.5h1.6v3H8zM11.2 19.5h1.6v3h-1.6zM14.4 19.5H16v3h-1.6zM1.5 8h3v1.6h-3zM1.5 11.2h3v1.6h-3zM1.5 14.4h3V16h-3zM19.5 8h3v1.6h-3zM19.5 11.2h3v1.6h-3zM19.5 14.4h3V16h-3z"/>
    <path fill-rule="evenodd" d="M6 4.5h12A1.5 1.5 0 0 1 19.5 6v12a1.5 1.5 0 0 1-1.5 1.5H6A1.5 1.5 0 0 1 4.5 18V6A1.5 1.5 0 0 1 6 4.5zm2 3.5v8h8V8zm2 2h4v4h-4z"/>
  </g>
</svg>`;

export const gpuIcon = new LabIcon({ name: 'jupyter-gpu:gpu', svgstr: svg });
