/**
 * What the panel and the status-bar item share: each tells the model whether it is visible
 * (attached, shown, its parents shown), so that the model runs only while something shows its
 * data, and renders what changed meanwhile when it is shown again.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import { GpuMonitorModel } from './model';

export abstract class ModelView extends Widget {
  /** `consumer` names the view to the model (`panel`, `statusbar`). */
  constructor(model: GpuMonitorModel, consumer: string) {
    super();
    this.model = model;
    this._consumer = consumer;
  }

  readonly model: GpuMonitorModel;

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.setVisible(this._consumer, false);
    super.dispose();
  }

  /** The view became visible: render what changed while it was not. */
  protected abstract onShown(): void;

  protected override onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._visibilityChanged();
  }

  protected override onBeforeDetach(msg: Message): void {
    this.model.setVisible(this._consumer, false);
    super.onBeforeDetach(msg);
  }

  protected override onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._visibilityChanged();
  }

  protected override onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._visibilityChanged();
  }

  private _visibilityChanged(): void {
    this.model.setVisible(this._consumer, this.isVisible);
    if (this.isVisible) {
      this.onShown();
    }
  }

  private _consumer: string;
}
