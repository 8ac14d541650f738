//! A level's requests by ticket, each in the slot its ticket names: no
//! hashing, and slots are reused as requests leave.

use super::Request;
use crate::Ticket;

/// The requests of one level.
#[derive(Debug, Clone, Default)]
pub(crate) struct Requests {
    slots: Vec<Option<(Ticket, Request)>>,
    /// Slots left empty, the last one next.
    free: Vec<u32>,
}

impl Requests {
    /// The slot the next request inserted takes.
    pub(crate) fn next_slot(&self) -> u32 {
        match self.free.last() {
            Some(&slot) => slot,
            None => u32::try_from(self.slots.len()).expect("fewer than 2^32 requests at once"),
        }
    }

    /// Files `request` under `ticket`, whose slot is [`next_slot`](Self::next_slot).
    pub(crate) fn insert(&mut self, ticket: Ticket, request: Request) {
        let slot = ticket.slot as usize;
        if self.free.last() == Some(&ticket.slot) {
            self.free.pop();
            self.slots[slot] = Some((ticket, request));
        } else {
            debug_assert_eq!(slot, self.slots.len(), "a ticket of the next slot");
            self.slots.push(Some((ticket, request)));
        }
    }

    pub(crate) fn get(&self, ticket: &Ticket) -> Option<&Request> {
        match self.slots.get(ticket.slot as usize) {
            Some(Some((t, r))) if t == ticket => Some(r),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, ticket: &Ticket) -> Option<&mut Request> {
        match self.slots.get_mut(ticket.slot as usize) {
            Some(Some((t, r))) if t == ticket => Some(r),
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, ticket: &Ticket) -> Option<Request> {
        let slot = self.slots.get_mut(ticket.slot as usize)?;
        if slot.as_ref().is_none_or(|(t, _)| t != ticket) {
            return None;
        }
        let (_, request) = slot.take()?;
        self.free.push(ticket.slot);
        Some(request)
    }

    /// Drops the request `ticket` where it lies (no move out of its slot).
    pub(crate) fn discard(&mut self, ticket: &Ticket) {
        if let Some(slot) = self.slots.get_mut(ticket.slot as usize)
            && slot.as_ref().is_some_and(|(t, _)| t == ticket)
        {
            *slot = None;
            self.free.push(ticket.slot);
        }
    }

    /// Every request, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Ticket, &Request)> {
        self.slots.iter().flatten().map(|(t, r)| (t, r))
    }
}
