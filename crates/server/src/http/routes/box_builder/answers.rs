//! The box builder's answers: the resource under `data`, in its singular name
//! (`{"data": {"box": {…}}}`); lists as `{"data": {"boxes": […]}, "pagination"}`. A few carry
//! the resource itself as `data`, as the API reference documents them (Create and Update Box Size, the bulk
//! update).

use actix_web::HttpResponse;
use mercer_domain::box_builder::admin::Page;
use mercer_domain::box_builder::resources::{
    BoxLineItem, BoxProduct, BoxSize, Selection, SubscriptionBox, TimeSlot, TimeSlotOption,
};
use mercer_domain::subscriptions::customers::PagePagination;
use serde::Serialize;
use utoipa::ToSchema;

/// 200 with `answer`.
pub(super) fn ok(answer: impl Serialize) -> HttpResponse {
    HttpResponse::Ok().json(answer)
}

/// 201 with `answer`.
pub(super) fn created(answer: impl Serialize) -> HttpResponse {
    HttpResponse::Created().json(answer)
}

// ---------------------------------------------------------------------------------------
// Boxes

/// `{"data": {"boxes": […]}, "pagination"}`.
#[derive(Serialize, ToSchema)]
pub struct BoxList {
    data: Boxes,
    pagination: PagePagination,
}

/// A page of boxes.
#[derive(Serialize, ToSchema)]
pub struct Boxes {
    boxes: Vec<SubscriptionBox>,
}

impl BoxList {
    pub(super) fn of((boxes, pagination): Page<SubscriptionBox>) -> Self {
        BoxList {
            data: Boxes { boxes },
            pagination,
        }
    }
}

/// `{"data": {"box": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct BoxAnswer {
    data: BoxData,
}

/// One box.
#[derive(Serialize, ToSchema)]
pub struct BoxData {
    #[serde(rename = "box")]
    subscription_box: SubscriptionBox,
}

impl BoxAnswer {
    pub(super) fn of(subscription_box: SubscriptionBox) -> Self {
        BoxAnswer {
            data: BoxData { subscription_box },
        }
    }
}

// ---------------------------------------------------------------------------------------
// Box products

/// `{"data": {"box_products": […]}, "pagination"}`.
#[derive(Serialize, ToSchema)]
pub struct BoxProductList {
    data: BoxProducts,
    pagination: PagePagination,
}

/// A page of box products.
#[derive(Serialize, ToSchema)]
pub struct BoxProducts {
    box_products: Vec<BoxProduct>,
}

impl BoxProductList {
    pub(super) fn of((box_products, pagination): Page<BoxProduct>) -> Self {
        BoxProductList {
            data: BoxProducts { box_products },
            pagination,
        }
    }
}

/// `{"data": {"box_product": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct BoxProductAnswer {
    data: BoxProductData,
}

/// One box product.
#[derive(Serialize, ToSchema)]
pub struct BoxProductData {
    box_product: BoxProduct,
}

impl BoxProductAnswer {
    pub(super) fn of(box_product: BoxProduct) -> Self {
        BoxProductAnswer {
            data: BoxProductData { box_product },
        }
    }
}

// ---------------------------------------------------------------------------------------
// Box sizes

/// `{"data": {"box_sizes": […]}, "pagination"}`.
#[derive(Serialize, ToSchema)]
pub struct BoxSizeList {
    data: BoxSizes,
    pagination: PagePagination,
}

/// A page of box sizes.
#[derive(Serialize, ToSchema)]
pub struct BoxSizes {
    box_sizes: Vec<BoxSize>,
}

impl BoxSizeList {
    pub(super) fn of((box_sizes, pagination): Page<BoxSize>) -> Self {
        BoxSizeList {
            data: BoxSizes { box_sizes },
            pagination,
        }
    }
}

/// `{"data": {"box_size": {…}}}` (Get Box Size).
#[derive(Serialize, ToSchema)]
pub struct BoxSizeAnswer {
    data: BoxSizeData,
}

/// One box size.
#[derive(Serialize, ToSchema)]
pub struct BoxSizeData {
    box_size: BoxSize,
}

impl BoxSizeAnswer {
    pub(super) fn of(box_size: BoxSize) -> Self {
        BoxSizeAnswer {
            data: BoxSizeData { box_size },
        }
    }
}

/// `{"data": {…}}`: the size itself under `data` (Create and Update Box Size, the documented
/// answer).
#[derive(Serialize, ToSchema)]
pub struct BoxSizeSaved {
    data: BoxSize,
}

impl BoxSizeSaved {
    pub(super) fn of(data: BoxSize) -> Self {
        BoxSizeSaved { data }
    }
}

/// `{"data": […]}`: the sizes saved by the bulk update, in the order given.
#[derive(Serialize, ToSchema)]
pub struct BoxSizesSaved {
    data: Vec<BoxSize>,
}

impl BoxSizesSaved {
    pub(super) fn of(data: Vec<BoxSize>) -> Self {
        BoxSizesSaved { data }
    }
}

// ---------------------------------------------------------------------------------------
// Time slots and their options

/// `{"data": {"time_slots": […]}, "pagination"}`.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotList {
    data: TimeSlots,
    pagination: PagePagination,
}

/// A page of time slots.
#[derive(Serialize, ToSchema)]
pub struct TimeSlots {
    time_slots: Vec<TimeSlot>,
}

impl TimeSlotList {
    pub(super) fn of((time_slots, pagination): Page<TimeSlot>) -> Self {
        TimeSlotList {
            data: TimeSlots { time_slots },
            pagination,
        }
    }
}

/// `{"data": {"time_slot": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotAnswer {
    data: TimeSlotData,
}

/// One time slot.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotData {
    time_slot: TimeSlot,
}

impl TimeSlotAnswer {
    pub(super) fn of(time_slot: TimeSlot) -> Self {
        TimeSlotAnswer {
            data: TimeSlotData { time_slot },
        }
    }
}

/// `{"data": {"time-slot": {…}}}`: Create Time Slot's answer, in the documented name.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotCreated {
    data: CreatedTimeSlotData,
}

/// The time slot created, under the documented name `time-slot`.
#[derive(Serialize, ToSchema)]
pub struct CreatedTimeSlotData {
    #[serde(rename = "time-slot")]
    time_slot: TimeSlot,
}

impl TimeSlotCreated {
    pub(super) fn of(time_slot: TimeSlot) -> Self {
        TimeSlotCreated {
            data: CreatedTimeSlotData { time_slot },
        }
    }
}

/// `{"data": {"time_slot_options": […]}}`: every product the slot offers, in order.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotOptionList {
    data: TimeSlotOptions,
}

/// A slot's options.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotOptions {
    time_slot_options: Vec<TimeSlotOption>,
}

impl TimeSlotOptionList {
    pub(super) fn of(time_slot_options: Vec<TimeSlotOption>) -> Self {
        TimeSlotOptionList {
            data: TimeSlotOptions { time_slot_options },
        }
    }
}

/// `{"data": {"time_slot_option": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotOptionAnswer {
    data: TimeSlotOptionData,
}

/// One time slot option.
#[derive(Serialize, ToSchema)]
pub struct TimeSlotOptionData {
    time_slot_option: TimeSlotOption,
}

impl TimeSlotOptionAnswer {
    pub(super) fn of(time_slot_option: TimeSlotOption) -> Self {
        TimeSlotOptionAnswer {
            data: TimeSlotOptionData { time_slot_option },
        }
    }
}

// ---------------------------------------------------------------------------------------
// Selections and the box line items

/// `{"data": {"selections": […]}, "pagination"}`.
#[derive(Serialize, ToSchema)]
pub struct SelectionList {
    data: Selections,
    pagination: PagePagination,
}

/// A page of a customer's selections.
#[derive(Serialize, ToSchema)]
pub struct Selections {
    selections: Vec<Selection>,
}

impl SelectionList {
    pub(super) fn of((selections, pagination): Page<Selection>) -> Self {
        SelectionList {
            data: Selections { selections },
            pagination,
        }
    }
}

/// `{"data": {"selection": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct SelectionAnswer {
    data: SelectionData,
}

/// One selection.
#[derive(Serialize, ToSchema)]
pub struct SelectionData {
    selection: Selection,
}

impl SelectionAnswer {
    pub(super) fn of(selection: Selection) -> Self {
        SelectionAnswer {
            data: SelectionData { selection },
        }
    }
}

/// `{"data": {"subscription_line_items": […]}, "pagination"}`.
#[derive(Serialize, ToSchema)]
pub struct BoxLineItemList {
    data: BoxLineItems,
    pagination: PagePagination,
}

/// A page of the boxes' subscription line items.
#[derive(Serialize, ToSchema)]
pub struct BoxLineItems {
    subscription_line_items: Vec<BoxLineItem>,
}

impl BoxLineItemList {
    pub(super) fn of((subscription_line_items, pagination): Page<BoxLineItem>) -> Self {
        BoxLineItemList {
            data: BoxLineItems {
                subscription_line_items,
            },
            pagination,
        }
    }
}

/// `{"data": {"subscription_line_item": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct BoxLineItemAnswer {
    data: BoxLineItemData,
}

/// One box's subscription line item.
#[derive(Serialize, ToSchema)]
pub struct BoxLineItemData {
    subscription_line_item: BoxLineItem,
}

impl BoxLineItemAnswer {
    pub(super) fn of(subscription_line_item: BoxLineItem) -> Self {
        BoxLineItemAnswer {
            data: BoxLineItemData {
                subscription_line_item,
            },
        }
    }
}
